// A store that keeps permits and grants on release, for the store kit's own tests: correct
// on `clock` unless `broken` names a fault, one flag each:
// `ignoresWeights` (counts holders, not their weights), `overtakes` (a later arrival is
// granted while an owner that does not fit waits at the head of the queue), `mixesLimits`
// (a try with another limit than the key's is judged by its own limit, never answered
// { limit }).
import { createRequire } from 'node:module';

const { acquireOptions } = createRequire(import.meta.url)('../../lib/common/permits.cjs');

export function permitStore(clock, broken = {}) {
  const keys = new Map(); // key -> { limit, holders: Map(owner -> { weight, token, expires }), queue: [{ owner, weight, ttl }] }
  const listeners = new Map(); // key -> Set of onReleased
  const last = new Map(); // key -> last token
  const check = (key, owner, ttl) => {
    if (typeof key !== 'string' || key === '') throw new TypeError(`key must be a non-empty string, got ${key}`);
    if (typeof owner !== 'string' || owner === '') throw new TypeError(`owner must be a non-empty string, got ${owner}`);
    if (ttl !== undefined && !(Number.isSafeInteger(ttl) && ttl > 0)) throw new RangeError(`ttlMs must be a positive integer, got ${ttl}`);
  };
  const used = (entry) => (broken.ignoresWeights ? entry.holders.size : [...entry.holders.values()].reduce((sum, h) => sum + h.weight, 0));
  const fits = (entry, weight) => used(entry) + (broken.ignoresWeights ? 1 : weight) <= entry.limit;
  /** The key's entry with its lapsed holders dropped (their permits handed on), or undefined when unused. */
  const live = (key) => {
    const entry = keys.get(key);
    if (!entry) return undefined;
    let lapsed = false;
    for (const [owner, h] of entry.holders) if (h.expires <= clock.now()) lapsed = entry.holders.delete(owner);
    if (lapsed) handOn(key, entry);
    if (entry.holders.size > 0 || entry.queue.length > 0) return entry;
    keys.delete(key);
    return undefined;
  };
  const grant = (key, entry, owner, weight, ttl) => {
    const token = (last.get(key) ?? 0) + 1;
    last.set(key, token);
    entry.holders.set(owner, { weight, token, expires: clock.now() + ttl });
    return token;
  };
  /** Grants the queue from its head while each fits; offers each grant in a later turn. */
  function handOn(key, entry) {
    while (entry.queue.length > 0 && fits(entry, entry.queue[0].weight)) {
      const { owner, weight, ttl } = entry.queue.shift();
      const fencingToken = grant(key, entry, owner, weight, ttl);
      setImmediate(() => {
        const claimed = [...(listeners.get(key) ?? [])].some((fn) => fn({ owner, fencingToken, age: 0 }) === true);
        if (!claimed && entry.holders.get(owner)?.token === fencingToken) release(key, owner);
      });
    }
  }
  function release(key, owner) {
    check(key, owner);
    const entry = live(key);
    if (!entry) return false;
    const held = entry.holders.delete(owner);
    // A queued owner that gives up leaves the queue.
    if (!held) entry.queue = entry.queue.filter((q) => q.owner !== owner);
    handOn(key, entry);
    live(key);
    return held;
  }
  return {
    grantsOnRelease: true,
    get permits() {
      return true;
    },
    async acquire(key, owner, ttl, options) {
      check(key, owner, ttl);
      const { queue, limit = 1, weight = 1 } = acquireOptions(options);
      const entry = live(key) ?? { limit, holders: new Map(), queue: [] };
      keys.set(key, entry);
      const mine = entry.holders.get(owner);
      if (mine) return { fencingToken: mine.token };
      if (entry.limit !== limit) {
        if (!broken.mixesLimits) return { limit: entry.limit };
        entry.limit = limit;
      }
      const place = entry.queue.findIndex((q) => q.owner === owner);
      const ahead = broken.overtakes ? 0 : place === -1 ? entry.queue.length : place;
      if (ahead === 0 && fits(entry, weight)) {
        if (place !== -1) entry.queue.splice(place, 1);
        return { fencingToken: grant(key, entry, owner, weight, ttl) };
      }
      if (queue && place === -1) entry.queue.push({ owner, weight, ttl });
      live(key);
      return undefined;
    },
    async renew(key, owner, ttl) {
      check(key, owner, ttl);
      const holder = live(key)?.holders.get(owner);
      if (!holder) return false;
      holder.expires = clock.now() + ttl;
      return true;
    },
    async release(key, owner) {
      return release(key, owner);
    },
    subscribe(key, onReleased) {
      if (!listeners.has(key)) listeners.set(key, new Set());
      const fn = (grant) => onReleased(grant);
      listeners.get(key).add(fn);
      return () => listeners.get(key)?.delete(fn);
    },
  };
}
