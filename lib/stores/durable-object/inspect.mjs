/**
 * `inspect` of `LockDurableObject` (./index.mjs): what the object keeps for
 * its key, read without changing it. A lease past its expiry is not shown (the object
 * ends it at its next call or timer); a queued owner that stopped asking is not either.
 */

/**
 * `{ holders, waiters }` of an object whose lease is `lease` ({ owner, token, expiresAt })
 * and whose queue is `queue` (owner -> { since, seenAt }, in arrival order), at `now`;
 * null when nobody holds or waits. `stale`: how long a queued owner may go without asking.
 */
export function inspectObject(lease, queue, now, stale) {
  const holders =
    lease !== undefined && lease.expiresAt > now ? [{ owner: lease.owner, fencingToken: lease.token, ttl: lease.expiresAt - now }] : [];
  const waiters = [];
  for (const [owner, entry] of queue) {
    if (now - entry.seenAt <= stale) waiters.push({ owner, since: entry.since });
  }
  return holders.length === 0 && waiters.length === 0 ? null : { holders, waiters };
}

/** `list` of a store whose objects cannot be enumerated: a TypeError saying so. */
export function cannotList() {
  throw new TypeError(
    'DurableObjectLockStore cannot list keys: a Durable Object namespace has no way to enumerate its objects ' +
      '(one per key); inspect(key) reads one key',
  );
}
