'use strict';
/**
 * `inspect` and `list` of `EtcdLockStore` (./index.cjs, whose top comment describes
 * the keys): range reads and a lease's time to live, never a write.
 *
 * - `inspect(key)` reads every key under the lock's prefix in create-revision order:
 *   the first is the holder (its create revision is the fencing token; the time left
 *   is its lease's, which etcd counts in whole seconds), the others are the waiters in
 *   queue order. etcd records no time with a key: a waiter's `since` is absent. On a
 *   lock held with permits (permit-keys.cjs), the holders are the keys whose weights
 *   up to them fit in the limit, each with its weight (and mode), and `limit` is shown.
 * - `list({ prefix, limit })` reads the range of lock keys under the store's prefix that
 *   start with `prefix`, PAGE keys per request (keys only, in key order), and starts
 *   each next request after the last lock's keys: memory stays bounded, and each request
 *   is a bounded read.
 */

const { ASCEND, BY_CREATE, enc, rangeEnd } = require('./requests.cjs');
const { keyPermits } = require('./permit-keys.cjs');
const { permitsShown } = require('../shared/permits.cjs');

const PAGE = 500;
/** Keys (holder and waiters) an inspection reads at most under one lock. */
const MAX_ENTRIES = 10_000;

/** The lock key encoded as `encoded` (the inverse of etcd-requests.cjs `enc`). */
function decode(encoded) {
  return encoded.replace(/%2F|%25/g, (c) => (c === '%2F' ? '/' : '%'));
}

/**
 * `inspect` and `list` for a store whose lock keys are `${namespace}${prefix}/${enc(key)}/…`
 * on the client's `kv` and `leaseClient`.
 */
function etcdInspector({ kv, leases, namespace, prefix }) {
  const root = Buffer.concat([namespace, Buffer.from(`${prefix}/`)]);
  return {
    async inspect(key) {
      const lock = Buffer.concat([root, Buffer.from(`${enc(key)}/`)]);
      const reply = await kv.range({
        key: lock,
        range_end: rangeEnd(lock),
        sort_order: ASCEND,
        sort_target: BY_CREATE,
        limit: MAX_ENTRIES,
      });
      const first = reply.kvs[0];
      if (first === undefined) return undefined;
      const { limit } = keyPermits(lock, first.key);
      // Weights summed in create-revision order: the keys that fit hold (one, when plain).
      let taken = 0;
      const held = [];
      const waiting = [];
      for (const kv of reply.kvs) {
        const { weight } = keyPermits(lock, kv.key);
        taken += weight;
        (taken <= limit ? held : waiting).push({ kv, weight });
      }
      const shown = await Promise.all(
        held.map(async ({ kv, weight }) => {
          const seconds = Number((await leases.leaseTimeToLive({ ID: kv.lease })).TTL);
          if (seconds < 0) return undefined; // lapsed, its key about to go
          const holder = { owner: kv.value.toString(), fencingToken: Number(kv.create_revision), ttl: seconds * 1000 };
          return limit > 1 ? { ...holder, ...permitsShown(limit, weight) } : holder;
        }),
      );
      const holders = shown.filter((h) => h !== undefined);
      const waiters = waiting.map(({ kv }) => ({ owner: kv.value.toString() }));
      if (holders.length === 0 && waiters.length === 0) return undefined;
      return limit > 1 ? { key, holders, waiters, limit } : { key, holders, waiters };
    },
    async *list({ prefix: keyStart, limit }) {
      const start = Buffer.concat([root, Buffer.from(enc(keyStart))]);
      const end = keyStart === '' ? rangeEnd(root) : rangeEnd(start);
      let from = start;
      let left = limit;
      while (left > 0) {
        const reply = await kv.range({ key: from, range_end: end, limit: PAGE, keys_only: true });
        let last;
        for (const { key: name } of reply.kvs) {
          const rest = name.subarray(root.length).toString();
          const slash = rest.indexOf('/');
          if (slash === -1 || rest.slice(0, slash) === last) continue;
          last = rest.slice(0, slash);
          yield decode(last);
          if (--left === 0) return;
        }
        if (!reply.more || last === undefined) return;
        from = rangeEnd(Buffer.concat([root, Buffer.from(`${last}/`)]));
      }
    },
  };
}

module.exports = { etcdInspector };
