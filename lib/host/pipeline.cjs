'use strict';
// Pipelines: ResiliencePipelineBuilder checks a pipeline's locks once, at build;
// ResiliencePipeline#execute starts an Execution under them (execution.cjs) and hands
// what the engine's first answer asks for to the engine host.

const { describe, checkOptionNames } = require('../common/describe.cjs');
const { checkWellFormed } = require('../common/well-formed.cjs');
const {
  statusOf,
  payloadOf,
  STARTED_RUNNING,
  STARTED_STORE_CALL,
  STARTED_STORE_CALL_QUEUED,
  OPTION_RENEW,
  OPTION_TELEMETRY,
  OPTION_DIRECT,
  STORE_MEMORY,
} = require('./protocol.cjs');
const { HOST } = require('./symbols.cjs');
const { bucketOf, GRANTED, QUEUED } = require('./fast-path.cjs');
const { DEFAULT_TTL, LOCK_OPTIONS, EXECUTE_OPTIONS, BUILDER_OPTIONS, checkKey, checkStore, checkPermits, ownerName } = require('./options.cjs');
const { checkOpenTelemetryOption } = require('../otel/detect.cjs');

// The resolve and reject functions of the promise made last with `takeSettlers`: an
// executor shared by every execution makes no closure per execution.
const settlers = { resolve: undefined, reject: undefined };
function takeSettlers(resolve, reject) {
  settlers.resolve = resolve;
  settlers.reject = reject;
}

/**
 * The pipeline classes of one API; `api` is its shared context (lib/host/api.cjs), whose
 * execution classes and checks they use.
 */
function definePipelines(api) {
  const { fromEngine, ambient, nested, hostOf, MemoryLockStore, checkDuration, checkTtl, refuseMemoryWait, lingerKind } = api;
  const { ResilienceContext, Execution, liveContext } = api;

  function normaliseLock(options, host) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`addLock options must be an object, got ${describe(options)}`);
    }
    checkOptionNames(options, LOCK_OPTIONS, 'addLock');
    const { key, ttl = DEFAULT_TTL, wait = 0, store, onLockLost, name, linger } = options;
    if (key !== undefined && typeof key !== 'function' && typeof key !== 'string') {
      throw new TypeError(`key must be a string or a function (context) => string, got ${describe(key)}`);
    }
    if (key === '') throw new TypeError('key must be a non-empty string, got ""');
    // A fixed key is checked here, once; a key function's result at every execution.
    if (typeof key === 'string') checkWellFormed(key, 'key');
    const ttlMs = checkTtl(ttl);
    const waitMs = checkDuration(wait, 'wait', { infiniteOk: true });
    if (onLockLost !== undefined && typeof onLockLost !== 'function') {
      throw new TypeError(`onLockLost must be a function, got ${describe(onLockLost)}`);
    }
    if (name !== undefined && typeof name !== 'string') throw new TypeError(`name must be a string, got ${describe(name)}`);
    let target = host.defaultStore;
    if (store !== undefined) {
      checkStore(store);
      // A memory store's leases run on its own clock, which this pipeline does not move.
      if (store instanceof MemoryLockStore && store[HOST] !== host) {
        throw new TypeError(
          "store is a MemoryLockStore on another time provider than this lock's: its leases run on the store's clock (give both the same timeProvider)",
        );
      }
      target = store;
    }
    refuseMemoryWait(waitMs, target, host);
    const ref = host.registerStore(target);
    const { id } = ref;
    const kind = lingerKind(linger, ref, target);
    const { limit, weight } = checkPermits(options, target, ref.kind === STORE_MEMORY);
    if (limit > 1 && kind !== ref.kind) throw new TypeError('linger is not combined with limit or mode: each holder of permits has its own lease');
    // On a memory store of this host: its fast holders (fast-path.cjs), handed to the
    // engine before it is asked for the key, and a fixed key's bucket.
    const held = ref.kind === STORE_MEMORY ? host.fast.heldOn(id) : undefined;
    const bucket = held !== undefined && typeof key === 'string' ? bucketOf(id, key) : -1;
    // The lock keeps its store alive: the host only holds stores weakly.
    // `lastKey`: the last key given per execution found well-formed, and its bucket.
    return {
      key,
      ttlMs,
      waitMs,
      kind,
      id,
      store: target,
      onLockLost,
      name: name ?? 'lock',
      ownerName: ownerName(name),
      held,
      bucket,
      limit,
      weight,
      lastKey: undefined,
      lastBucket: -1,
    };
  }

  function resolveKey(lock, context) {
    let key = lock.key;
    if (typeof key === 'function') key = key(context);
    else if (key === undefined) key = context.operationKey;
    if (key === undefined && lock.key === undefined) {
      throw new TypeError('key is missing: pass addLock({ key }) or execute(cb, { operationKey })');
    }
    if (typeof key !== 'string' || key.length === 0) {
      throw new TypeError(`key must resolve to a non-empty string, got ${describe(key)}`);
    }
    if (key !== lock.lastKey) checkWellFormed(key, lock.key === undefined ? 'operationKey' : 'key');
    return key;
  }

  class ResiliencePipeline {
    constructor(host, locks, telemetry, ambientToken, otel) {
      this.host = host;
      this.locks = locks;
      this.telemetry = telemetry;
      // Its OpenTelemetry recorder (lib/otel/recorder.cjs), when on; fed by the engine's events.
      this.otel = otel;
      // Whether callbacks run with their context ambient (runCallback in callbacks.cjs).
      this.ambientToken = ambientToken;
      this.options = telemetry || otel ? OPTION_RENEW | OPTION_TELEMETRY : OPTION_RENEW;
      // A single lock with a fixed key is defined in the engine once, on first use (not
      // at build: workerd forbids the engine's random seed at module load), and then
      // started by id: no key or options cross the boundary per execution.
      this.definedLock = locks.length === 1 && typeof locks[0].key === 'string' ? undefined : -1;
      this.fixedKeys = this.definedLock === undefined ? [locks[0].key] : undefined;
      // One lock on a JS store, its key given per execution: the definition of the last
      // key used twice in a row (`keyedLock`); created on first use.
      this.keyed = this.definedLock === -1 && locks.length === 1 && locks[0].kind !== STORE_MEMORY ? null : undefined;
      // One lock on a memory store, no telemetry (nor OpenTelemetry, which needs the
      // engine's events): a free key is granted without the engine. Not a ttl of 1 ms (or
      // less), whose renewal falls due as the lease lapses: the engine loses such a lease
      // at once, which a fast hold could not mirror.
      // Nor permits: the engine counts them.
      this.fastLock = locks.length === 1 && locks[0].held !== undefined && !telemetry && !otel && locks[0].ttlMs > 1 && locks[0].limit === 1;
    }

    defineLock() {
      const l = this.locks[0];
      const host = this.host;
      try {
        this.definedLock = host.engine.defineLock(l.kind, l.id, l.key, l.ttlMs, l.waitMs, l.ownerName, l.limit, l.weight);
      } catch (error) {
        throw fromEngine(error);
      }
      // The definition is this pipeline's: the engine keeps the key only while the pipeline
      // lives (its executions hold it, and copy the key into their own locks).
      if (this.definedLock >= 0) host.definedLockGone?.register(this, this.definedLock);
      return this.definedLock;
    }

    /**
     * The engine's definition of this pipeline's lock on `key`, or -1. A key used twice
     * in a row is defined, so that its next executions start by id (a fast call) instead
     * of passing key and options each time; the definition of the key before goes
     * (executions started on it keep their copy), and the last with the pipeline.
     */
    keyedLock(key) {
      let keyed = this.keyed;
      if (keyed === null) {
        keyed = this.keyed = { key: undefined, id: -1 };
        this.host.definedLockGone?.register(this, keyed);
      }
      if (key === keyed.key) {
        if (keyed.id === -1) {
          const l = this.locks[0];
          try {
            // -2: not definable (the engine's table is full); `start` takes it each time.
            const id = this.host.engine.defineLock(l.kind, l.id, key, l.ttlMs, l.waitMs, l.ownerName, l.limit, l.weight);
            keyed.id = id >= 0 ? id : -2;
          } catch {
            keyed.id = -2; // `start` throws the engine's error for this key
          }
        }
        return keyed.id;
      }
      if (keyed.id >= 0) this.host.engine.undefineLock(keyed.id);
      keyed.key = key;
      keyed.id = -1;
      return -1;
    }

    /** Runs `callback` while holding every lock of the pipeline; resolves to its value. */
    execute(callback, options) {
      return nested(this.started, this, callback, options);
    }

    /** The promise of an execution begun now. */
    started(callback, options) {
      const promise = new Promise(takeSettlers);
      const reject = settlers.reject;
      try {
        this.begin(callback, options, settlers.resolve, reject, undefined);
      } catch (error) {
        reject(error);
      }
      return promise;
    }

    /** `execute(callback)` on a pipeline of one keyless lock, under `key` (withLock's form). */
    executeOn(key, callback) {
      return nested(this.startedOn, this, key, callback);
    }

    /** The promise of an execution begun now under `key`. */
    startedOn(key, callback) {
      return new Promise((resolve, reject) => {
        try {
          checkKey(key);
          this.begin(callback, undefined, resolve, reject, key);
        } catch (error) {
          reject(error);
        }
      });
    }

    /** Like `execute`, but never rejects: `{ ok: true, value }` or `{ ok: false, error }`. */
    settle(callback, options) {
      return this.execute(callback, options).then(
        (value) => ({ ok: true, value }),
        (error) => ({ ok: false, error }),
      );
    }

    begin(callback, options, resolve, reject, givenKey) {
      if (typeof callback !== 'function') throw new TypeError(`callback must be a function, got ${describe(callback)}`);
      if (options !== undefined) {
        if (options === null || typeof options !== 'object' || Array.isArray(options)) {
          throw new TypeError(`execute options must be an object, got ${describe(options)}`);
        }
        checkOptionNames(options, EXECUTE_OPTIONS, 'execute');
      }
      const operationKey = options?.operationKey;
      if (operationKey !== undefined && typeof operationKey !== 'string') {
        throw new TypeError(`operationKey must be a string, got ${describe(operationKey)}`);
      }
      const signal = options?.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new TypeError(`signal must be an AbortSignal, got ${describe(signal)}`);
      }
      if (signal?.aborted) throw signal.reason;
      const host = this.host;
      if (host.dead) throw host.dead;
      const locks = this.locks;
      const context = new ResilienceContext(undefined, operationKey);
      const outer = ambient ? ambient.getStore() : api.syncContext;
      if (outer !== undefined) context._outer = liveContext(outer);
      const rec = new Execution(host, this, 0, callback, context, locks, undefined);
      context._rec = rec;
      // A pipeline with one fixed key shares one array of keys (read only) between its executions.
      const keys =
        this.fixedKeys ??
        (givenKey !== undefined
          ? [givenKey]
          : locks.length === 1
            ? [resolveKey(locks[0], context)]
            : locks.map((lock) => resolveKey(lock, context)));
      // A key function may have aborted the signal: its 'abort' event has fired already.
      if (signal?.aborted) throw signal.reason;
      rec.keys = keys;
      rec.resolve = resolve;
      rec.reject = reject;
      if (signal) {
        rec.callerSignal = signal;
        rec.onCallerAbort = () => {
          if (rec.running) return context.abort(signal.reason);
          // Queued behind a fast holder: the engine takes the queue over, then cancels.
          if (rec.fastWaiting) host.fast.handOverAll(locks, keys);
          // Granted but not yet running: `run` finds the signal aborted.
          if (rec.fastHeld === undefined && rec.id !== 0) host.call(() => host.engine.cancel(rec.id));
        };
        signal.addEventListener('abort', rec.onCallerAbort, { once: true });
      }
      if (this.fastLock) {
        const got = host.fast.grant(rec, locks[0], keys[0]);
        if (got === GRANTED) return;
        if (got === QUEUED) {
          // Passed the key by its holder's finish: the callback starts from a job made here.
          if (ambient !== undefined) rec.awaitGrant();
          return;
        }
      } else {
        host.fast.handOverAll(locks, keys);
      }
      try {
        // Its spans start here, under the caller's active span.
        if (this.otel !== undefined) rec.otel = this.otel.begin(keys);
        this.startInEngine(rec, keys, signal);
      } catch (error) {
        if (rec.otel !== undefined) rec.otel.settled();
        throw error;
      }
      // Granted later (by a release, a store's answer): the callback starts from a promise
      // job made here, in this caller's async context, not in the granter's.
      if (!rec.scheduled && rec.callback !== undefined && ambient !== undefined) rec.awaitGrant();
    }

    /**
     * Starts `rec` through the engine, which may grant it at once, call a store, or queue
     * it; `waitMs`, when given, instead of its lock's (a fast queue's waiter: what is left).
     */
    startInEngine(rec, keys, signal, waitMs) {
      const host = this.host;
      const locks = this.locks;
      const id = host.newExecId();
      rec.id = id;
      host.execs.set(id, rec);
      const engine = host.engine;
      const last = locks.length - 1;
      // The first acquire may come back in the status word, to be made at once, unless
      // effects are being applied: it would overtake those.
      const bits = host.draining || host.handing ? this.options : this.options | OPTION_DIRECT;
      let status;
      rec.starting = true;
      try {
        // A wait of its own is given only to `start`: a definition carries the lock's.
        let defined = -1;
        if (waitMs === undefined) {
          defined = this.definedLock ?? this.defineLock();
          if (defined < 0 && this.keyed !== undefined) defined = this.keyedLock(keys[0]);
        }
        if (defined >= 0) {
          status = engine.startDefined(id, bits, defined);
        } else {
          for (let i = 0; i < last; i++) {
            const l = locks[i];
            engine.addLock(l.kind, l.id, keys[i], l.ttlMs, l.waitMs, l.ownerName, l.limit, l.weight);
          }
          const l = locks[last];
          status = engine.start(id, bits, l.kind, l.id, keys[last], l.ttlMs, waitMs ?? l.waitMs, l.ownerName, l.limit, l.weight);
        }
      } catch (error) {
        rec.starting = false;
        host.execs.delete(id);
        if (signal) signal.removeEventListener('abort', rec.onCallerAbort);
        throw fromEngine(error);
      }
      try {
        // A synchronous grant carries the innermost token as the payload; a store call
        // handed back, its request. A grant runs the callback from a microtask (`run`).
        const result = host.status(statusOf(status));
        if (result === STARTED_RUNNING) rec.run(payloadOf(status));
        else if (result === STARTED_STORE_CALL || result === STARTED_STORE_CALL_QUEUED) {
          host.callLayer0(rec, payloadOf(status), true, result === STARTED_STORE_CALL_QUEUED);
        }
      } finally {
        rec.starting = false;
      }
    }
  }

  class ResiliencePipelineBuilder {
    constructor(options = {}) {
      if (options === null || typeof options !== 'object') {
        throw new TypeError(`builder options must be an object, got ${describe(options)}`);
      }
      checkOptionNames(options, BUILDER_OPTIONS, 'ResiliencePipelineBuilder');
      const { timeProvider, telemetry, ambientToken = true, openTelemetry } = options;
      this.host = hostOf(timeProvider, 'timeProvider');
      if (telemetry !== undefined && typeof telemetry !== 'function') {
        throw new TypeError(`telemetry must be a function (event) => void, got ${describe(telemetry)}`);
      }
      if (typeof ambientToken !== 'boolean') throw new TypeError(`ambientToken must be a boolean, got ${describe(ambientToken)}`);
      checkOpenTelemetryOption(openTelemetry);
      this.telemetry = telemetry;
      this.ambientToken = ambientToken;
      this.openTelemetry = openTelemetry;
      this.locks = [];
    }

    /** Adds a lock; the first added is outermost. Throws for bad options, never later. */
    addLock(options) {
      this.locks.push(normaliseLock(options, this.host));
      return this;
    }

    build() {
      if (this.locks.length === 0) throw new TypeError('a pipeline needs at least one addLock() before build()');
      const locks = this.locks.slice();
      const otel = api.openTelemetry.forPipeline(locks, this.openTelemetry);
      return new ResiliencePipeline(this.host, locks, this.telemetry, this.ambientToken, otel);
    }
  }

  return { ResiliencePipeline, ResiliencePipelineBuilder };
}

module.exports = { definePipelines };
