'use strict';
// Executions: what the engine host runs and settles. HostedExecution is the contract
// the host relies on; Execution runs a pipeline's callback under its locks (the
// LeaseExecution of a manual lease is in lease.cjs). ResilienceContext is what a
// callback sees, and getLockToken finds the context code runs under.

const { LockNotAcquiredError, LockLostError, LockStoreError, LockLimitMismatchError } = require('./errors.cjs');
const { describe } = require('../common/describe.cjs');
const { runCallback } = require('./callbacks.cjs');
const {
  statusOf,
  payloadOf,
  FINISHED_VALUE,
  FINISHED_CALLBACK_ERROR,
  FINISHED_LOST,
  finishSettlement,
  finishHandsOff,
  finishCallsStore,
} = require('./protocol.cjs');

/** The key of the fencing token in `context.properties`. */
const LOCK_TOKEN = 'leasehold.lockToken';

function noop() {}

// The resolve function of the promise `awaitGrant` made last: an executor shared by every
// execution makes no closure per execution.
let grantResolve;
function takeResolve(resolve) {
  grantResolve = resolve;
}

/** Starts the callback of `rec` from the job `awaitGrant` made, which `run` resolved with it. */
function startGranted(rec) {
  // Settled meanwhile (its engine retired), or aborted by its caller: not started.
  if (rec.callback === undefined || rec.finished) return undefined;
  if (rec.callerSignal?.aborted) return rec.cancelUnstarted();
  try {
    return rec.invoke(true);
  } catch (error) {
    return rec.fail(error);
  }
}

/** The abort reason for a lease on `key` that a retired engine no longer renews. */
function unrenewed(key, failure) {
  return new LockLostError(key, `lease on lock '${key}' is no longer renewed: its engine failed`, { cause: failure });
}

/**
 * The execution classes of one API; `api` is its shared context (lib/host/api.cjs):
 * `fromEngine`, `ambient` (an AsyncLocalStorage, where the runtime has one) and
 * `syncContext` (the context whose callback runs synchronously right now), which
 * Execution#run sets.
 */
function defineExecutions(api) {
  const { fromEngine, ambient } = api;

  /**
   * What the engine host asks of every execution it keeps in `host.execs` by `id`.
   * Subclasses implement:
   *   run(token)         every lock is held (token: the innermost fencing token)
   *   lost(layer)        lock `layer` is lost
   *   settled(fx)        the engine settled it: a `settled` record of lib/host/protocol.cjs
   *   fail(error)        it fails with `error`: the host could not carry out its part
   *   retire(failure)    the engine died; nothing renews or settles it any more
   * and may override extended(ok) (an extend() answered) and event(fx, thrown) (a
   * telemetry event), which do nothing here. The host also keeps on it the key and
   * owner of each acquire (the engine sends renewals and releases without them) and
   * the errors stores threw, which may become a rejection's cause later.
   */
  class HostedExecution {
    constructor(host, id) {
      this.host = host;
      this.id = id;
      this.callerSignal = undefined;
      // [key, owner, ...] of each lock's acquire on a JS store (`keepLockText`).
      this.lockText = undefined;
      // request id -> what a store threw for it (`keepCause`).
      this.causes = undefined;
    }

    /** Keeps the key and owner of the acquire of lock `layer`, for its renewals and release. */
    keepLockText(layer, key, owner) {
      const text = (this.lockText ??= []);
      text[2 * layer] = key;
      text[2 * layer + 1] = owner;
    }

    /** Keeps what a store threw for an acquire: the rejection that cites it may come after its outer locks' release. */
    keepCause(request, error) {
      (this.causes ??= new Map()).set(request, error);
    }

    /** The error a `settled` record with outcome `error` stands for. */
    errorOf(fx) {
      switch (fx.code) {
        case 'LOCK_NOT_ACQUIRED':
          return new LockNotAcquiredError(fx.key, fx.message);
        case 'LOCK_LOST':
          return new LockLostError(fx.key, fx.message);
        case 'LOCK_STORE_FAILED': {
          const options = fx.cause ? { cause: this.causes?.get(fx.cause) ?? this.host.thrown.get(fx.cause) } : undefined;
          return new LockStoreError(fx.key, fx.method, fx.message, options);
        }
        case 'LOCK_LIMIT_MISMATCH':
          return new LockLimitMismatchError(fx.key, fx.limit, fx.heldWith, fx.message);
        case 'ABORT_ERR':
          return this.callerSignal?.reason ?? new Error('the operation was aborted');
        default:
          return fromEngine(fx);
      }
    }

    extended() {}

    event() {}
  }

  class ResilienceContext {
    constructor(rec, operationKey) {
      this.operationKey = operationKey;
      this._rec = rec;
      this._controller = undefined;
      this._properties = undefined;
      this._token = undefined;
      // The context whose callback was running where this execution started (nested
      // locks), if still running then; see `liveContext`.
      this._outer = undefined;
    }

    /** Per-execution properties; the fencing token is under `LOCK_TOKEN`. Created on first read. */
    get properties() {
      if (!this._properties) {
        this._properties = new Map();
        if (this._token !== undefined) this._properties.set(LOCK_TOKEN, this._token);
      }
      return this._properties;
    }

    setToken(token) {
      this._token = token;
      if (this._properties) this._properties.set(LOCK_TOKEN, token);
    }

    /** Aborted when the caller cancels or the lease is lost. Created on first read. */
    get signal() {
      const rec = this._rec;
      if (!this._controller) {
        this._controller = new AbortController();
        if (rec.abortReason !== undefined) this._controller.abort(rec.abortReason);
      }
      return this._controller.signal;
    }

    abort(reason) {
      if (this._rec.abortReason !== undefined) return;
      this._rec.abortReason = reason;
      if (this._controller) this._controller.abort(reason);
    }
  }

  class Execution extends HostedExecution {
    constructor(host, pipeline, id, callback, context, locks, keys) {
      super(host, id);
      this.pipeline = pipeline;
      this.callback = callback;
      this.context = context;
      this.locks = locks;
      this.keys = keys;
      this.abortReason = undefined;
      this.lostLayer = -1;
      // Each lock lost while the callback ran is told once (`lost`).
      this.lostLayers = undefined;
      this.running = false;
      // The callback has settled: a lock lost later has no one left to tell.
      this.finished = false;
      this.value = undefined;
      this.error = undefined;
      this.resolve = undefined;
      this.reject = undefined;
      this.onCallerAbort = undefined;
      // Set while execute() starts it: a grant then runs the callback from a microtask.
      this.starting = false;
      // On the fast path (fast-path.cjs): the Map of fast holders it is in, when it began
      // (the fast path's clock) and its token.
      this.fastHeld = undefined;
      this.since = 0;
      this.token = undefined;
      // A fast holder: the executions queued behind it for its key (a FastWaiters), if
      // any; a queued execution: that it waits in such a queue (fast-path.cjs, `queue`).
      this.fastWaiters = undefined;
      this.fastWaiting = false;
      this.nextWaiter = undefined;
      // Queued with a deadline: when its wait ends (FastPath#clock).
      this.waitUntil = undefined;
      // Its callback is to start from a promise job made for it (`FastPath#schedule`).
      this.scheduled = false;
      // Resolves the job `awaitGrant` made, which starts the callback.
      this.granted = undefined;
      // What it records to OpenTelemetry (lib/otel/recorder.cjs), when its pipeline does.
      this.otel = undefined;
    }

    /**
     * Every lock is held: run the callback under its token; resolve via `finish`.
     * `ownJob`: called from the promise job `FastPath#schedule` made for it.
     */
    run(token, ownJob) {
      // The callback never starts inside the execute() call that started it.
      if (this.starting) return this.host.fast.schedule(this, token);
      // Settled before its turn came (its engine was retired): it never runs.
      if (this.callback === undefined) return undefined;
      this.running = true;
      // Every grant brings its token: a run effect, a status word's payload, a store's
      // answer, or the shared handoff word.
      this.context.setToken(token);
      // The caller may have aborted after the engine granted the locks but before this
      // run: the callback never runs then.
      if (this.callerSignal?.aborted) {
        this.context.abort(this.callerSignal.reason);
        return this.cancelUnstarted();
      }
      // Granted from elsewhere (a release, a store's answer): the callback starts from
      // the job `awaitGrant` made in execute(), in the caller's async context.
      const granted = this.granted;
      if (granted !== undefined) {
        this.granted = undefined;
        return granted(this);
      }
      return this.invoke(ownJob);
    }

    /** Calls the callback (its locks held, its token set); `finish` when it settles. */
    invoke(ownJob) {
      let result;
      let thenable = false;
      try {
        result = runCallback(api, this.pipeline, this.context, this.callback, ownJob);
        thenable = result !== null && typeof result === 'object' && typeof result.then === 'function';
      } catch (error) {
        return this.finish(false, error);
      }
      if (thenable) {
        try {
          return (result instanceof Promise ? result : Promise.resolve(result)).then(
            (value) => this.finish(true, value),
            (error) => this.finish(false, error),
          );
        } catch (error) {
          // A Promise subclass whose `then` throws: the callback failed.
          return this.finish(false, error);
        }
      }
      return this.finish(true, result);
    }

    /**
     * Makes, in execute() (so in its caller's async context, which a promise job keeps),
     * the job that will start the callback once the locks are granted: `run` from a
     * release or a store's answer only resolves it.
     */
    awaitGrant() {
      new Promise(takeResolve).then(startGranted);
      this.granted = grantResolve;
    }

    /**
     * The caller aborted after the grant, before the callback started: the engine settles
     * it with the caller's reason whatever befell its leases meanwhile (`cancel`).
     */
    cancelUnstarted() {
      const reason = this.callerSignal.reason;
      if (this.fastHeld !== undefined) return this.finishFast(false, reason);
      this.finished = true;
      const host = this.host;
      try {
        host.call(() => host.engine.cancel(this.id));
      } catch (error) {
        return this.fail(fromEngine(error));
      }
      return undefined;
    }

    finish(ok, valueOrError) {
      if (this.fastHeld !== undefined) return this.finishFast(ok, valueOrError);
      const host = this.host;
      this.finished = true;
      // Detached work of this callback now reads an enclosing lock's token, if one is
      // still held; a finished context keeps no chain of finished ones behind it.
      const context = this.context;
      if (context._outer !== undefined) context._outer = liveContext(context._outer);
      if (ok) this.value = valueOrError;
      else this.error = valueOrError;
      let word;
      try {
        // A handoff only where nothing else runs: not while effects are applied, nor
        // inside a handed-over execution (its own finish drains instead).
        word = host.engine.finish(this.id, ok, !host.draining && !host.handing);
      } catch (error) {
        return this.fail(fromEngine(error));
      }
      const status = statusOf(word);
      // This execution settles before the effects the word announces are applied and
      // before the next holder runs: those may run the next holders' callbacks, and
      // settlements keep the order of the holders, also when a callback is synchronous.
      // Its record stays until the effects are applied: its own events are among them.
      // Handing off where callbacks start from their own promise job (`awaitGrant`), it
      // settles after the handoff, still before the next callback runs: the next
      // holder's job is queued ahead of this caller's resumption (which would start its
      // next execution first), as a release in async-mutex wakes the next waiter first.
      const handsOff = finishHandsOff(status);
      const after = handsOff && ambient !== undefined;
      let settled = true;
      let outcomeOk = false;
      let outcome;
      switch (finishSettlement(status)) {
        case FINISHED_VALUE:
          outcomeOk = true;
          outcome = this.value;
          break;
        case FINISHED_CALLBACK_ERROR:
          outcome = this.error;
          break;
        case FINISHED_LOST:
          outcome = this.lostError(this.error);
          break;
        default:
          settled = false; // a `settled` effect follows once the store answers
      }
      if (settled && !after) this.settle(outcomeOk, outcome);
      try {
        host.status(status);
      } catch (error) {
        // Applying the effects failed (another execution's, as a rule): this execution
        // fails with it unless it has settled already.
        if (!settled) return this.fail(error);
      }
      if (settled) {
        // Its last events (its release) came with the effects just applied.
        if (this.otel !== undefined) this.otel.settled();
        host.forget(this.id);
      }
      // What this settlement starts (the caller's next execute) runs while the next
      // holder awaits, not between the two holders.
      if (handsOff) host.handoff(payloadOf(word));
      else if (finishCallsStore(status)) host.callLayer0(this, payloadOf(word), false, false);
      if (settled && after) this.settle(outcomeOk, outcome);
      return undefined;
    }

    /**
     * The callback of a fast holder settled: the key goes to its first waiter, or is free
     * again; nothing else was recorded. As in `finish`, the next holder's job is queued
     * ahead of this caller's resumption.
     */
    finishFast(ok, valueOrError) {
      this.finished = true;
      const context = this.context;
      if (context._outer !== undefined) context._outer = liveContext(context._outer);
      this.host.fast.free(this);
      this.settle(ok, valueOrError);
    }

    lostError(cause) {
      const key = this.keys[Math.max(0, this.lostLayer)];
      return new LockLostError(key, undefined, { cause });
    }

    lost(layer, reason = new LockLostError(this.keys[layer])) {
      if (this.lostLayer < 0) this.lostLayer = layer;
      (this.lostLayers ??= [])[layer] = true;
      const key = this.keys[layer];
      this.context.abort(reason);
      const onLockLost = this.locks[layer].onLockLost;
      if (onLockLost) {
        try {
          const result = onLockLost({ context: this.context, key });
          if (result && typeof result.then === 'function') result.then(undefined, () => {});
        } catch {
          // A throwing onLockLost must not break the engine; the loss is already signalled.
        }
      }
    }

    settled(fx) {
      if (fx.outcome === 'value') return this.done(true, this.value);
      if (fx.outcome === 'callbackError') return this.done(false, this.error);
      return this.done(false, this.errorFrom(fx));
    }

    errorFrom(fx) {
      if (fx.code === 'LOCK_LOST' && this.running) return this.lostError(this.error);
      return this.errorOf(fx);
    }

    fail(error) {
      return this.done(false, error);
    }

    /** The engine was retired (`die`): a running callback loses every lock it still held. */
    retire(failure) {
      if (this.running && !this.finished) {
        for (let layer = 0; layer < this.locks.length; layer++) {
          if (!this.lostLayers?.[layer]) this.lost(layer, unrenewed(this.keys[layer], failure));
        }
      }
      this.fail(failure);
    }

    done(ok, valueOrError) {
      if (this.fastHeld !== undefined) this.host.fast.free(this);
      this.host.execs.delete(this.id);
      // Its events have all come (they precede a `settled` effect).
      if (this.otel !== undefined) this.otel.settled();
      this.settle(ok, valueOrError);
    }

    /** Resolves or rejects the execution's promise; its record is the caller's to drop. */
    settle(ok, valueOrError) {
      if (this.callerSignal) this.callerSignal.removeEventListener('abort', this.onCallerAbort);
      const { resolve, reject } = this;
      // The promise was made where `execute` was called, maybe inside an enclosing
      // callback, whose context AsyncLocalStorage keeps on it: once settled, the record
      // lets go of it, so that a context left reachable (by a timer of its callback)
      // keeps no chain of enclosing contexts alive.
      this.resolve = noop;
      this.reject = noop;
      // Nor does it keep the callback or its outcome: a nested execution's context,
      // kept by work its callback left behind, still refers to this one (`_outer`).
      this.callback = undefined;
      this.value = undefined;
      this.error = undefined;
      if (ok) resolve(valueOrError);
      else reject(valueOrError);
    }

    event(fx, thrown) {
      if (this.otel !== undefined) {
        try {
          this.otel.event(fx, this.host.engine.now());
        } catch {
          // Telemetry never breaks a lock.
        }
      }
      const telemetry = this.pipeline.telemetry;
      // The engine's events for a failed or cancelled acquire feed OpenTelemetry only.
      if (telemetry === undefined || fx.outcome === 'acquireFailed' || fx.outcome === 'cancelled') return;
      const lock = this.locks[fx.layer];
      const event = { type: fx.outcome, key: this.keys[fx.layer], name: lock.name, operationKey: this.context.operationKey };
      if (fx.outcome === 'acquired' || fx.outcome === 'rejected') event.waitedMs = fx.waited;
      if (fx.outcome === 'acquired' || fx.outcome === 'renewed') event.fencingToken = fx.token;
      if (fx.outcome === 'renewalFailed' || fx.outcome === 'releaseFailed') {
        event.error = thrown ?? new LockStoreError(event.key, fx.outcome === 'renewalFailed' ? 'renew' : 'release', fx.message);
      }
      try {
        telemetry(event);
      } catch {
        // Telemetry never breaks a lock.
      }
    }
  }

  /**
   * The fencing token of the innermost lock the code runs under; undefined outside any
   * lock, and inside a callback of a pipeline built with `ambientToken: false`.
   */
  function getLockToken(context) {
    if (context !== undefined) {
      if (context instanceof ResilienceContext) return context._rec?.finished ? undefined : context._token;
      if (context === null || typeof context !== 'object' || !(context.properties instanceof Map)) {
        throw new TypeError(`context must be an execution context, got ${describe(context)}`);
      }
      return context.properties.get(LOCK_TOKEN);
    }
    // Work started under a lock can run after its execution settled and released the
    // lock (a timer, a detached promise): it runs under the enclosing lock still held,
    // if it was started in a nested one, else under none.
    return liveContext(ambient ? (ambient.getStore() ?? api.syncContext) : api.syncContext)?._token;
  }

  /** `context`, or the nearest context enclosing it whose callback still runs; undefined when none does. */
  function liveContext(context) {
    while (context !== undefined && context._rec?.finished) context = context._outer;
    return context;
  }

  return { HostedExecution, ResilienceContext, Execution, getLockToken, liveContext };
}

module.exports = { defineExecutions, unrenewed, LOCK_TOKEN };
