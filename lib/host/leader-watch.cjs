'use strict';
// Who leads: `leader(store, key)` reads the key's holder through `store.inspect(key)`, and
// `watchLeader(store, key)` yields each change of leader. A watcher looks again at once
// when the store announces a release (`subscribe`) or a candidate of this process (on the
// same store object) wins or leaves; when the leader's lease would run out unless
// renewed; and every `interval`, for what nothing announces (a free key taken, a lease
// handed to another process's waiter). Reading never extends, takes or wakes anything.

const { describe, checkOptionNames } = require('../common/describe.cjs');
const { checkKey } = require('./options.cjs');

const WATCH_OPTIONS = ['signal', 'interval'];
const DEFAULT_INTERVAL_MS = 1000;
const MAX_TIMER_MS = 2 ** 31 - 1;

function checkInspectable(store, what) {
  if (store === null || typeof store !== 'object') {
    throw new TypeError(`store must be a LockStore, got ${describe(store)}`);
  }
  if (typeof store.inspect !== 'function') {
    throw new TypeError(`${what} needs the store's inspect(key) method, which this store does not have`);
  }
}

/** Whether two answers of `leader` name a different leader (not a renewal of the same one). */
function differs(a, b) {
  if (a === undefined || b === undefined) return a !== b;
  return a.owner !== b.owner || a.term !== b.term;
}

/** `leader` and `watchLeader` of one API; `names` its CandidateNames, `api` its shared context. */
function defineLeaderWatch(api, names) {
  const { checkDuration, MemoryLockStore } = api;

  /** The leader as `inspect` shows it: `{ key, name, owner, term, ttl }`, or undefined. */
  async function read(store, key) {
    const found = await store.inspect(key);
    const holder = found?.holders?.[0];
    if (holder === undefined) return undefined;
    const { name, owner } = names.read(store, key, holder.owner);
    return { key, name, owner, term: holder.fencingToken, ttl: holder.ttl };
  }

  /**
   * Who leads `key` on `store` now: `{ key, name, owner, term, ttl }` (`ttl`: milliseconds
   * left on the lease unless renewed), or undefined. Rejects with what `inspect` rejects
   * with; throws TypeError for a store without `inspect`.
   */
  async function leader(store, key) {
    checkInspectable(store, 'leader()');
    checkKey(key);
    return read(store, key);
  }

  /**
   * An async iterator: the leader now (or undefined), then each new leader or vacancy.
   * Ends when `options.signal` aborts or the loop breaks; throws what `inspect` throws.
   */
  function watchLeader(store, key, options = {}) {
    checkInspectable(store, 'watchLeader()');
    checkKey(key);
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { signal, interval }, got ${describe(options)}`);
    }
    checkOptionNames(options, WATCH_OPTIONS, 'watchLeader');
    const { signal, interval = DEFAULT_INTERVAL_MS } = options;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(`signal must be an AbortSignal, got ${describe(signal)}`);
    }
    const intervalMs = checkDuration(interval, 'interval', { infiniteOk: false });
    if (intervalMs <= 0) throw new RangeError(`interval must be positive, got ${describe(interval)}`);
    return watching(store, key, signal, intervalMs);
  }

  async function* watching(store, key, signal, intervalMs) {
    let poked = false;
    let wake;
    const poke = () => {
      poked = true;
      wake?.();
    };
    const stops = [names.watch(store, key, poke)];
    // A memory store announces nothing to a reader: only this process's candidates do.
    const pushes = typeof store.subscribe === 'function' && !(store instanceof MemoryLockStore);
    if (pushes) {
      try {
        // Never claims a grant (returns undefined): the waiter it is for does.
        stops.push(store.subscribe(key, () => void poke()));
      } catch {
        // Without announcements this watcher looks every interval.
      }
    }
    signal?.addEventListener('abort', poke, { once: true });
    let last;
    let first = true;
    try {
      while (!signal?.aborted) {
        poked = false;
        const now = await read(store, key);
        if (signal?.aborted) return;
        if (first || differs(last, now)) {
          first = false;
          last = now;
          yield now;
        }
        if (poked || signal?.aborted) continue;
        // Announcements cover a release to nobody, not a lapse nor a lease handed to a
        // waiter of another process: look again every interval, and when the leader's
        // lease would run out unless renewed.
        let delay = intervalMs;
        if (now !== undefined && Number.isFinite(now.ttl)) delay = Math.min(intervalMs, now.ttl + 1);
        await new Promise((resolve) => {
          wake = resolve;
          const timer = setTimeout(resolve, Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(delay))));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      signal?.removeEventListener('abort', poke);
      for (const stop of stops) {
        try {
          stop?.();
        } catch {
          // A store that fails to unsubscribe costs a wasted wake-up, nothing more.
        }
      }
    }
  }

  return { leader, watchLeader };
}

module.exports = { defineLeaderWatch };
