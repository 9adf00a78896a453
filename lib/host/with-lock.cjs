'use strict';
// withLock: one lock around one function, or a method decorator; a pipeline of one lock
// built per call (kept for the next call with the same options) or per decorated method.

const { isRejection } = require('./errors.cjs');
const { describe, checkOptionNames } = require('../common/describe.cjs');
const { TIME_PROVIDER } = require('./symbols.cjs');
const { DEFAULT_TTL, WITH_LOCK_OPTIONS } = require('./options.cjs');

/** withLock's first argument is its key (not its options). */
const isKey = (value) => typeof value === 'string' || typeof value === 'function';

/** `withLock` for one API; `api` is its shared context (lib/host/api.cjs). */
function defineWithLock(api) {
  const { MemoryLockStore, ResiliencePipelineBuilder } = api;

  /**
   * Runs `fn` under one lock: `withLock(key, fn, options)`. Called without a function —
   * `withLock(key, options)` or `withLock(options)` — it is a method decorator (standard
   * decorators) that runs each call of the method under the lock.
   *
   * Unlike `addLock`, a held key is waited for: `wait` defaults to the lock's ttl, longer
   * than a lease left behind by a crashed holder can last. With `skipOnLockFailure` it
   * defaults to 0, and a key still held resolves `undefined` instead of rejecting.
   */
  function withLock(keyOrOptions, fnOrOptions, maybeOptions) {
    // `withLock(key, fn)`: one pipeline for every call, the key passed with each.
    if (typeof keyOrOptions === 'string' && typeof fnOrOptions === 'function' && maybeOptions === undefined) {
      try {
        return plainPipeline().executeOn(keyOrOptions, fnOrOptions);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    if (typeof fnOrOptions === 'function') {
      try {
        // `withLock(key, fn, options?)`, or `withLock(options, fn)` with the key in them.
        const locked = lastRunner(keyOrOptions, maybeOptions);
        if (!isKey(keyOrOptions) && maybeOptions !== undefined) {
          throw new TypeError('withLock(options, fn) takes no third argument: put every option in the first');
        }
        return locked.run(fnOrOptions);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    // `withLock(key, options)` or `withLock(options)`: its signal and operationKey apply
    // to every call, as the function form's do to its one.
    const locked = lockedRunner(keyOrOptions, fnOrOptions);
    return function lockedMethod(method, context) {
      if (typeof method !== 'function' || context?.kind !== 'method') {
        throw new TypeError('withLock(...) decorates methods only');
      }
      return function (...args) {
        return locked.run(() => method.apply(this, args));
      };
    };
  }

  // The pipeline of `withLock(key, fn)`: the options' defaults, a lock with no key of its own.
  let plain;
  function plainPipeline() {
    if (plain === undefined) {
      const wait = api.memoryWaitRefused !== undefined ? 0 : DEFAULT_TTL;
      plain = new ResiliencePipelineBuilder().addLock({ wait }).build();
      plain.definedLock = -1;
    }
    return plain;
  }

  // The runner of the last `withLock(key, fn, options)` call, for the next call with the
  // same key and options (each option the same value): building a pipeline costs more
  // than the execution it runs. `options` is a copy, so a changed option is seen.
  let last;
  function lastRunner(keyOrOptions, options) {
    const key = isKey(keyOrOptions) ? keyOrOptions : undefined;
    const given = key === undefined ? keyOrOptions : options;
    if (last !== undefined && last.key === key && sameOptions(last.options, given)) {
      // Used twice: now worth defining its lock in the engine, as a pipeline's is.
      if (!last.reused) {
        last.reused = true;
        last.locked.define();
      }
      return last.locked;
    }
    const locked = lockedRunner(keyOrOptions, options);
    last = {
      key,
      options: given === undefined ? undefined : { ...given },
      locked,
      reused: false,
    };
    return locked;
  }

  /** The pipeline of one withLock call or decorated method, and how it runs a function. */
  function lockedRunner(keyOrOptions, options) {
    let lockOptions = options;
    if (isKey(keyOrOptions)) {
      if (options !== undefined && (options === null || typeof options !== 'object')) {
        throw new TypeError(`withLock options must be an object, got ${describe(options)}`);
      }
      if (options?.key !== undefined) {
        throw new TypeError('withLock was given a key twice: as its first argument and as options.key');
      }
      lockOptions = { ...options, key: keyOrOptions };
    } else {
      lockOptions = keyOrOptions;
    }
    if (lockOptions === null || typeof lockOptions !== 'object') {
      throw new TypeError(`withLock takes a key (a string or a function) or lock options first, got ${describe(lockOptions)}`);
    }
    checkOptionNames(lockOptions, WITH_LOCK_OPTIONS, 'withLock');
    if (lockOptions.key === undefined && lockOptions.operationKey === undefined) {
      throw new TypeError("withLock needs a key: withLock('key', fn), withLock({ key }, fn), or { operationKey }");
    }
    const { timeProvider, telemetry, ambientToken, openTelemetry, signal, operationKey, skipOnLockFailure = false, ...lock } =
      lockOptions;
    if (typeof skipOnLockFailure !== 'boolean') {
      throw new TypeError(`skipOnLockFailure must be a boolean, got ${describe(skipOnLockFailure)}`);
    }
    // A MemoryLockStore's leases run on its clock: without a timeProvider, so does the lock.
    const clock = timeProvider === undefined && lock.store instanceof MemoryLockStore ? lock.store[TIME_PROVIDER] : timeProvider;
    // Where the runtime cannot wait on the in-process store (workerd), withLock fails fast
    // there by default rather than refusing every call.
    const cannotWait =
      api.memoryWaitRefused !== undefined && clock === undefined && (lock.store === undefined || lock.store instanceof MemoryLockStore);
    if (lock.wait === undefined) lock.wait = skipOnLockFailure || cannotWait ? 0 : (lock.ttl ?? DEFAULT_TTL);
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry, ambientToken, openTelemetry }).addLock(lock).build();
    // Built for one call (the helper) or one method: not worth a defined lock each time.
    pipeline.definedLock = -1;
    const execute = signal === undefined && operationKey === undefined ? undefined : { signal, operationKey };
    return {
      /** Lets the pipeline define its lock in the engine (a fixed key), as one kept for reuse. */
      define() {
        if (pipeline.fixedKeys !== undefined) pipeline.definedLock = undefined;
      },
      run(callback) {
        if (!skipOnLockFailure) return pipeline.execute(callback, execute);
        // Only this lock's own rejection is skipped: one from inside the callback (a nested lock
        // that failed) is the caller's to see.
        let started = false;
        return pipeline
          .execute((context) => {
            started = true;
            return callback(context);
          }, execute)
          .catch((error) => {
            if (!started && isRejection(error)) return undefined;
            throw error;
          });
      },
    };
  }

  return withLock;
}

/** Whether options objects `kept` (a copy) and `given` have the same own options, each the same value. */
function sameOptions(kept, given) {
  if (kept === undefined || given === undefined) return kept === given;
  if (given === null || typeof given !== 'object') return false;
  let count = 0;
  for (const name in given) {
    if (!Object.prototype.hasOwnProperty.call(given, name)) continue;
    if (!Object.is(kept[name], given[name]) || !Object.prototype.hasOwnProperty.call(kept, name)) return false;
    count += 1;
  }
  return count === Object.keys(kept).length;
}

module.exports = { defineWithLock };
