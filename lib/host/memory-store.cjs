'use strict';
// MemoryLockStore: the in-process store, native to the engine. Its leases live in the
// engine of its time source; this class only checks arguments and asks that engine.

const { MEMORY_RELEASED } = require('./protocol.cjs');
const { describe, checkOptionNames } = require('../common/describe.cjs');
const { HOST, STORE_ID, TIME_PROVIDER } = require('./symbols.cjs');
const { checkKey } = require('./options.cjs');
const { memoryInspector } = require('./memory-inspect.cjs');
const { acquireOptions } = require('../common/permits.cjs');

/** Asks `store`'s engine `fn(engine, storeId)`; a failure of the engine itself is an Error. */
function askMemory(store, fn) {
  const host = store[HOST];
  return host.ask(() => fn(host.engine, store[STORE_ID]));
}

/** Hands a fast holder of `key` (lib/host/fast-path.cjs) to the engine, which answers for the key next. */
function handOver(store, key) {
  store[HOST].fast.handOverKey(store[STORE_ID], key);
}

/** The MemoryLockStore class of one API; `api` is its shared context (lib/host/api.cjs). */
function defineMemoryLockStore(api) {
  const { hostOf, checkDuration } = api;

  function checkTtlMs(ttlMs) {
    if (typeof ttlMs !== 'number') throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(ttlMs)}`);
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`ttlMs must be a positive finite number, got ${describe(ttlMs)}`);
    return checkDuration(ttlMs, 'ttlMs', { infiniteOk: false });
  }

  /** The in-process store, native to the engine: FIFO wake-up, monotonic tokens, bounded memory. */
  class MemoryLockStore {
    constructor(options = {}) {
      if (options === null || typeof options !== 'object') {
        throw new TypeError(`options must be an object, got ${describe(options)}`);
      }
      checkOptionNames(options, ['timeProvider'], 'MemoryLockStore');
      const host = hostOf(options.timeProvider, 'timeProvider');
      this[HOST] = host;
      this[TIME_PROVIDER] = options.timeProvider;
      this[STORE_ID] = host.ask(() => host.engine.createMemoryStore());
      host.memoryStoreGone?.register(this, this[STORE_ID]);
    }

    static [HOST](host, id) {
      const store = Object.create(MemoryLockStore.prototype);
      store[HOST] = host;
      store[STORE_ID] = id;
      return store;
    }

    /** Keys held or waited for. */
    get size() {
      // The engine knows nothing of the keys held on the fast path: they add up.
      const fast = this[HOST].fast.held[this[STORE_ID]]?.size ?? 0;
      return askMemory(this, (engine, id) => engine.memSize(id)) + fast;
    }

    /** Keeps permits: `limit`, `weight` and `mode` (README, "Limits and shared reads"). */
    get permits() {
      return true;
    }

    /**
     * Takes the lease on `key` for `owner`, or `weight` of its `limit` permits (options
     * `{ limit, weight }`): `{ fencingToken }`, undefined while held, or `{ limit }` when
     * the key is held with another limit.
     */
    async acquire(key, owner, ttlMs, options) {
      checkKey(key);
      checkKey(owner, 'owner');
      const ttl = checkTtlMs(ttlMs);
      const { limit = 1, weight = 1 } = acquireOptions(options);
      handOver(this, key);
      const token = askMemory(this, (engine, id) => engine.memAcquire(id, key, owner, ttl, limit, weight));
      if (token === null || token === undefined) return undefined;
      // The engine answers a limit mismatch as minus the key's limit.
      return token < 0 ? { limit: -token } : { fencingToken: token };
    }

    async renew(key, owner, ttlMs) {
      checkKey(key);
      checkKey(owner, 'owner');
      const ttl = checkTtlMs(ttlMs);
      handOver(this, key);
      return askMemory(this, (engine, id) => engine.memRenew(id, key, owner, ttl));
    }

    /** Ends `owner`'s lease; true when it held a live one. Wakes the first waiter. */
    async release(key, owner) {
      checkKey(key);
      checkKey(owner, 'owner');
      handOver(this, key);
      const host = this[HOST];
      return host.call(() => host.engine.memRelease(this[STORE_ID], key, owner)) === MEMORY_RELEASED;
    }

    /** Whether `key` has a live lease. Advisory: it may change right after. */
    async isLocked(key) {
      checkKey(key);
      handOver(this, key);
      return askMemory(this, (engine, id) => engine.memTtl(id, key)) != null;
    }

    /** The holder of `key` and its waiters in queue order, undefined when none. Reads only. */
    async inspect(key) {
      checkKey(key);
      return inspectorOf(this).inspect(key);
    }

    /** The keys held, in order, that start with `prefix`: at most `limit`. Reads only. */
    list(options) {
      return inspectorOf(this).list(options);
    }

    /** Milliseconds left on the live lease of `key`, undefined when free. Advisory. */
    async ttl(key) {
      checkKey(key);
      handOver(this, key);
      return askMemory(this, (engine, id) => engine.memTtl(id, key)) ?? undefined;
    }
  }

  function inspectorOf(store) {
    const fast = store[HOST].fast;
    const id = store[STORE_ID];
    return memoryInspector({
      ask: (fn) => askMemory(store, fn),
      handOver: (key) => handOver(store, key),
      handOverAll: () => {
        for (const key of fast.held[id]?.keys() ?? []) fast.handOverKey(id, key);
      },
      now: () => store[TIME_PROVIDER]?.now() ?? Date.now(),
    });
  }

  return MemoryLockStore;
}

module.exports = { defineMemoryLockStore };
