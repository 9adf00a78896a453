'use strict';
// Checks of what users pass in: durations, keys, stores and option names. Each throws
// a TypeError or RangeError naming the argument; none touches an engine's state.

const { checkWellFormed } = require('../common/well-formed.cjs');
const { describe } = require('../common/describe.cjs');
const { LOCK_LINGER_UNIT, SHARED_LIMIT } = require('./protocol.cjs');

/** A lock's ttl when `addLock` is given none. */
const DEFAULT_TTL = 30_000;

// The option names each entry point takes (checkOptionNames).
const PERMIT_OPTIONS = ['limit', 'weight', 'mode'];
const LOCK_OPTIONS = ['key', 'ttl', 'wait', 'store', 'onLockLost', 'name', 'linger', ...PERMIT_OPTIONS];
const EXECUTE_OPTIONS = ['operationKey', 'signal'];
const BUILDER_OPTIONS = ['timeProvider', 'telemetry', 'ambientToken', 'openTelemetry'];
const ACQUIRE_LOCK_OPTIONS = ['wait', 'signal', 'autoRenew', 'timeProvider', 'name', ...PERMIT_OPTIONS];
const WITH_LOCK_OPTIONS = [...LOCK_OPTIONS, ...BUILDER_OPTIONS, ...EXECUTE_OPTIONS, 'skipOnLockFailure'];

function checkKey(key, arg = 'key') {
  if (typeof key !== 'string') throw new TypeError(`${arg} must be a non-empty string, got ${describe(key)}`);
  if (key.length === 0) throw new TypeError(`${arg} must be a non-empty string, got ""`);
  checkWellFormed(key, arg);
}

function checkStore(store) {
  const methods = ['acquire', 'renew', 'release'];
  if (store === null || typeof store !== 'object' || methods.some((m) => typeof store[m] !== 'function')) {
    throw new TypeError(`store must be a LockStore with acquire, renew and release methods, got ${describe(store)}`);
  }
}

/**
 * The checks that need the engine (durations are parsed by the core, so that every
 * engine reads them alike) or the API's classes: `api` is the API's shared context
 * (lib/host/api.cjs).
 */
function createChecks(api) {
  const { binding, fromEngine } = api;

  /** `value` (milliseconds or a duration string) in milliseconds; -1 for Infinity where `infiniteOk`. */
  function checkDuration(value, arg, { infiniteOk }) {
    try {
      if (typeof value === 'number') return binding.checkDuration(value, undefined, arg, infiniteOk);
      if (typeof value === 'string') {
        // Checked here: the engine would show a lone surrogate as U+FFFD, hiding the fault.
        checkWellFormed(value, arg);
        return binding.checkDuration(undefined, value, arg, infiniteOk);
      }
    } catch (error) {
      if (error instanceof TypeError) throw error;
      throw fromEngine(error);
    }
    throw new TypeError(`${arg} must be milliseconds (a number) or a duration string like '30s', got ${describe(value)}`);
  }

  /** A positive ttl, in milliseconds. */
  function checkTtl(ttl) {
    const ttlMs = checkDuration(ttl, 'ttl', { infiniteOk: false });
    if (ttlMs <= 0) throw new RangeError(`ttl must be positive, got ${describe(ttl)}`);
    return ttlMs;
  }

  /**
   * Where a wait on an in-process store cannot be served (workerd: see lib/entries/workerd.mjs,
   * `memoryWaitRefused`), a lock that would wait on the system clock's memory store
   * throws the reason at once.
   */
  function refuseMemoryWait(waitMs, store, host) {
    const reason = api.memoryWaitRefused;
    if (reason !== undefined && waitMs > 0 && store instanceof api.MemoryLockStore && host === api.systemHost.instance) {
      throw new TypeError(reason);
    }
  }

  /**
   * A lock's `linger` in whole milliseconds: 0, or at most the turn of a store that
   * hands leases over locally (`ref`, its registration); the lock's kind argument.
   */
  function lingerKind(linger, ref, store) {
    if (linger === undefined) return ref.kind;
    const ms = Math.ceil(checkDuration(linger, 'linger', { infiniteOk: false }));
    if (ms === 0) return ref.kind;
    if (ref.turn === undefined) {
      throw new TypeError(
        `linger needs a store that hands leases over between executions (RedisLockStore, PostgresLockStore), got ${describe(store)}`,
      );
    }
    if (ms > ref.turn) {
      throw new RangeError(`linger must be at most the store's turn (its handOffAfter, ${ref.turn} ms), got ${describe(linger)}`);
    }
    return ref.kind + LOCK_LINGER_UNIT * ms;
  }

  return { checkDuration, checkTtl, refuseMemoryWait, lingerKind };
}

/** A lock that takes the one permit of its key: today's exclusive lock. */
const PLAIN = Object.freeze({ limit: 1, weight: 1 });

/**
 * A lock's permits from its `limit`, `weight` and `mode` options: `{ limit, weight }`
 * (PLAIN without them). A mode is permits of SHARED_LIMIT: a reader takes one, a writer
 * all. `store` must declare it can keep them: its `permits` (true, or 'modes' for the
 * modes alone); a memory store can.
 */
function checkPermits({ limit, weight, mode }, store, isMemory) {
  if (limit === undefined && weight === undefined && mode === undefined) return PLAIN;
  if (mode !== undefined) {
    if (mode !== 'shared' && mode !== 'exclusive') {
      throw new TypeError(`mode must be 'shared' or 'exclusive', got ${describe(mode)}`);
    }
    if (limit !== undefined || weight !== undefined) {
      throw new TypeError(`mode is not combined with ${limit !== undefined ? 'limit' : 'weight'}: a key is either shared and exclusive, or limited`);
    }
  } else {
    if (limit !== undefined && (typeof limit !== 'number' || !Number.isInteger(limit))) {
      throw new TypeError(`limit must be an integer, got ${describe(limit)}`);
    }
    if (limit !== undefined && (limit < 1 || limit >= SHARED_LIMIT)) {
      throw new RangeError(`limit must be from 1 to ${SHARED_LIMIT - 1}, got ${describe(limit)}`);
    }
    if (weight !== undefined && (typeof weight !== 'number' || !Number.isInteger(weight))) {
      throw new TypeError(`weight must be an integer, got ${describe(weight)}`);
    }
    const max = limit ?? 1;
    if (weight !== undefined && (weight < 1 || weight > max)) {
      throw new RangeError(`weight must be from 1 to the limit (${max}), got ${describe(weight)}`);
    }
  }
  const permits = mode === undefined ? { limit: limit ?? 1, weight: weight ?? 1 } : { limit: SHARED_LIMIT, weight: mode === 'shared' ? 1 : SHARED_LIMIT };
  if (permits.limit === 1) return PLAIN;
  const can = isMemory ? true : store.permits;
  if (can !== true && !(can === 'modes' && mode !== undefined)) {
    const option = mode !== undefined ? 'mode' : 'limit';
    const what = can === 'modes' ? 'keeps shared and exclusive modes only' : 'does not keep permits (it has no `permits` capability)';
    const named = typeof store.constructor === 'function' && store.constructor !== Object ? store.constructor.name : 'the store';
    throw new TypeError(`${option} needs a store that keeps permits; ${named} ${what}`);
  }
  return permits;
}

/**
 * A lock's `name` as it goes into its owner ids (core/src/owner_ids.rs): '' for none;
 * else at most 64 characters, each outside letters, digits, `.`, `_`, `/` and `-`
 * written `-`, so that an owner stays one readable word every store can keep.
 */
function ownerName(name) {
  if (name === undefined) return '';
  if (typeof name !== 'string') throw new TypeError(`name must be a string, got ${describe(name)}`);
  return name.replace(/[^A-Za-z0-9._/-]/g, '-').slice(0, 64);
}

module.exports = {
  DEFAULT_TTL,
  PLAIN,
  checkPermits,
  ownerName,
  LOCK_OPTIONS,
  EXECUTE_OPTIONS,
  BUILDER_OPTIONS,
  ACQUIRE_LOCK_OPTIONS,
  WITH_LOCK_OPTIONS,
  checkKey,
  checkStore,
  createChecks,
};
