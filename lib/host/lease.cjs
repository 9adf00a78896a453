'use strict';
// Manual leases: acquireLock starts a LeaseExecution (a HostedExecution with no
// callback: it runs by resolving a LeaseHandle), which its holder releases and extends
// by hand.

const { LockLostError } = require('./errors.cjs');
const { describe, checkOptionNames } = require('../common/describe.cjs');
const {
  statusOf,
  payloadOf,
  STARTED_RUNNING,
  FINISHED_VALUE,
  FINISHED_NOT_HELD,
  EXTENDED,
  NOT_EXTENDED,
  OPTION_RENEW,
  OPTION_MANUAL,
  STORE_MEMORY,
} = require('./protocol.cjs');
const { HOST } = require('./symbols.cjs');
const { ACQUIRE_LOCK_OPTIONS, checkKey, checkStore, checkPermits, ownerName } = require('./options.cjs');
const { unrenewed } = require('./execution.cjs');

function falsy() {
  return false;
}

/** `acquireLock` and its classes, for one API; `api` is its shared context (lib/host/api.cjs). */
function defineLeases(api) {
  const { fromEngine, nested, hostOf, MemoryLockStore, HostedExecution, checkDuration, checkTtl, refuseMemoryWait } = api;

  /** A lease held by hand: release it (and extend it) yourself. */
  class LeaseHandle {
    constructor(rec, key, owner, fencingToken) {
      this.key = key;
      this.owner = owner;
      this.fencingToken = fencingToken;
      Object.defineProperty(this, '_rec', { value: rec });
    }

    /** Aborted with a `LockLostError` when an auto-renewed lease is lost. Created on first read. */
    get signal() {
      const rec = this._rec;
      if (!rec.controller) {
        rec.controller = new AbortController();
        if (rec.abortReason !== undefined) rec.controller.abort(rec.abortReason);
      }
      return rec.controller.signal;
    }

    /**
     * Releases the lease. True only if this owner still held it; false after a lapse or a
     * takeover. Rejects with a LockStoreError when the store fails to release it.
     */
    release() {
      return this._rec.release();
    }

    /** Pushes the lease out to now + `ttl` (default: its own ttl). False once it is gone. */
    extend(ttl) {
      return this._rec.extend(ttl);
    }
  }

  class LeaseExecution extends HostedExecution {
    constructor(host, id, key, callerSignal, autoRenew) {
      super(host, id);
      this.key = key;
      this.callerSignal = callerSignal;
      this.autoRenew = autoRenew;
      this.onCallerAbort = undefined;
      this.running = false;
      this.released = undefined;
      this.controller = undefined;
      this.abortReason = undefined;
      this.extends = [];
      this.store = undefined;
      // The owner the lease was asked for under (a lease handed over locally has another).
      this.startOwner = undefined;
      this.resolve = undefined;
      this.reject = undefined;
    }

    run(token) {
      this.running = true;
      if (this.callerSignal?.aborted) {
        // Granted, but the caller gave up first: hand the lease back at once.
        const reason = this.callerSignal.reason;
        this.detachCaller();
        this.release().catch(() => {});
        return this.reject(reason);
      }
      this.detachCaller();
      const engine = this.host.engine;
      let handle;
      try {
        // A lease over before this run (granted and lapsed in one advance of fake time) is
        // no longer in the engine: its token came with the grant, its owner at the start.
        const owner = engine.layerOwner(this.id, 0) ?? this.lockText?.[1] ?? this.startOwner;
        handle = new LeaseHandle(this, this.key, owner, token ?? engine.token(this.id));
      } catch (error) {
        // The engine failed (a caught panic) while handing the lease over: the caller
        // is told, and the lease nobody can hold is handed back.
        this.release().catch(() => {});
        return this.reject(fromEngine(error));
      }
      this.resolve(handle);
    }

    detachCaller() {
      if (this.callerSignal) this.callerSignal.removeEventListener('abort', this.onCallerAbort);
    }

    lost() {
      this.abortWith(new LockLostError(this.key));
    }

    abortWith(reason) {
      if (this.abortReason !== undefined) return;
      this.abortReason = reason;
      this.controller?.abort(reason);
    }

    settled(fx) {
      if (!this.running) {
        this.host.execs.delete(this.id);
        this.detachCaller();
        if (fx.code === 'LOCK_NOT_ACQUIRED') return this.resolve(undefined);
        return this.reject(this.errorOf(fx));
      }
      this.host.execs.delete(this.id);
      // Lost or lapsed before release() was called: the engine wound the lease down on
      // its own.
      if (this.released === undefined) this.over();
      // The store failed to release: release() rejects with it (a loss answers false).
      else if (fx.outcome === 'error' && fx.code === 'LOCK_STORE_FAILED') {
        this.released.reject(this.errorOf(fx));
      } else this.released.resolve(fx.outcome === 'value');
    }

    /** The lease is over without a release() of its holder: release() and extend() answer false from now on. */
    over() {
      this.released ??= { promise: Promise.resolve(false), resolve() {}, reject() {} };
    }

    release() {
      // Released (or asked to be) already: false, whatever the first release() answers.
      if (this.released) return this.released.promise.then(falsy, falsy);
      let resolve;
      let reject;
      const promise = new Promise((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.released = { promise, resolve, reject };
      const host = this.host;
      let status;
      try {
        status = host.call(() => host.engine.finish(this.id, true, false));
      } catch (error) {
        host.execs.delete(this.id);
        return Promise.reject(error);
      }
      if (status === FINISHED_VALUE) {
        host.execs.delete(this.id);
        resolve(true);
      } else if (status === FINISHED_NOT_HELD) {
        host.execs.delete(this.id);
        resolve(false);
      }
      return promise;
    }

    extend(ttl) {
      return new Promise((resolve) => {
        let ttlMs;
        if (ttl !== undefined) {
          ttlMs = checkTtl(ttl);
        }
        if (this.released) return resolve(false);
        const host = this.host;
        // Waiting before the call: the answer may come inside it (a store that throws
        // synchronously is answered while the engine call is still draining).
        this.extends.push(resolve);
        const status = host.call(() => host.engine.extend(this.id, ttlMs));
        if (status === EXTENDED || status === NOT_EXTENDED) {
          this.extends.splice(this.extends.indexOf(resolve), 1);
          resolve(status === EXTENDED);
        }
      });
    }

    extended(ok) {
      this.extends.shift()?.(ok);
    }

    fail(error) {
      this.detachCaller();
      if (!this.running) this.reject(error);
      else this.released?.resolve(false);
      this.over();
      for (const resolve of this.extends.splice(0)) resolve(false);
    }

    /**
     * The engine was retired (`die`): an auto-renewed lease held by hand is renewed no
     * more, so it is lost. A lease without renewals stands until its ttl, as before.
     */
    retire(failure) {
      if (this.running && this.autoRenew && !this.released) this.abortWith(unrenewed(this.key, failure));
      this.fail(failure);
    }
  }

  /**
   * Acquires a lease by hand. Resolves to a handle, or `undefined` when the key stays held
   * past `wait`. Rejects with a `LockStoreError` when the store fails, or the abort reason.
   */
  function acquireLock(store, key, ttl, options = {}) {
    return nested(() => acquireLockNow(store, key, ttl, options));
  }

  function acquireLockNow(store, key, ttl, options) {
    return new Promise((resolve, reject) => {
      checkStore(store);
      checkKey(key);
      const ttlMs = checkTtl(ttl);
      if (options === null || typeof options !== 'object') {
        throw new TypeError(`options must be an object, got ${describe(options)}`);
      }
      checkOptionNames(options, ACQUIRE_LOCK_OPTIONS, 'acquireLock');
      const { wait = 0, signal, autoRenew = false, timeProvider, name } = options;
      const named = ownerName(name);
      const waitMs = checkDuration(wait, 'wait', { infiniteOk: true });
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new TypeError(`signal must be an AbortSignal, got ${describe(signal)}`);
      }
      if (typeof autoRenew !== 'boolean') throw new TypeError(`autoRenew must be a boolean, got ${describe(autoRenew)}`);
      const memory = store instanceof MemoryLockStore;
      const host = memory ? store[HOST] : hostOf(timeProvider, 'timeProvider');
      // A memory store's leases run on its own clock: another one here would be ignored.
      if (memory && timeProvider !== undefined && hostOf(timeProvider, 'timeProvider') !== host) {
        throw new TypeError("timeProvider must be the MemoryLockStore's own time provider (or left out): its leases run on the store's clock");
      }
      refuseMemoryWait(waitMs, store, host);
      if (host.dead) throw host.dead;
      if (signal?.aborted) throw signal.reason;
      const { kind, id: storeId } = host.registerStore(store);
      const permits = checkPermits(options, store, kind === STORE_MEMORY);
      // A key held on the fast path is the engine's before it is asked for it.
      if (kind === STORE_MEMORY) host.fast.handOverKey(storeId, key);
      const id = host.newExecId();
      const rec = new LeaseExecution(host, id, key, signal, autoRenew);
      rec.locks = [permits]; // what a store call reads of the lock: its permits
      rec.store = store; // held while the lease lives: the host holds stores weakly
      rec.resolve = resolve;
      rec.reject = reject;
      if (signal) {
        rec.onCallerAbort = () => host.call(() => host.engine.cancel(id));
        signal.addEventListener('abort', rec.onCallerAbort, { once: true });
      }
      host.execs.set(id, rec);
      let status;
      try {
        const bits = autoRenew ? OPTION_MANUAL | OPTION_RENEW : OPTION_MANUAL;
        status = host.engine.start(id, bits, kind, storeId, key, ttlMs, waitMs, named, permits.limit, permits.weight);
      } catch (error) {
        host.execs.delete(id);
        rec.detachCaller();
        throw fromEngine(error);
      }
      // Granted in the call: the token rides above the status bits.
      if (host.status(statusOf(status)) === STARTED_RUNNING) rec.run(payloadOf(status));
      else rec.startOwner = host.engine.layerOwner(id, 0) ?? undefined;
    });
  }

  return { LeaseHandle, acquireLock };
}

module.exports = { defineLeases };
