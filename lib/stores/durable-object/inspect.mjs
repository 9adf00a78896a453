/**
 * `inspect` of `LockDurableObject` (./object.mjs): what the object keeps for its key,
 * read without changing it. A permit past its expiry is not shown (the object ends it at
 * its next call or timer); a queued owner that stopped asking is not either.
 */
import { permitsShown } from '../shared/store-support.mjs';

/**
 * `{ holders, waiters, limit? }` of an object whose holders are `holders` (owner ->
 * { owner, token, expiresAt, weight }, oldest grant first), whose key has `limit` (1 for
 * plain leases: then neither `limit` nor the holders' weights are shown) and whose queue
 * is `queue` (owner -> { since, seenAt }, in arrival order), at `now`; null when nobody
 * holds or waits. `stale`: how long a queued owner may go without asking.
 */
export function inspectObject(holders, limit, queue, now, stale) {
  const permits = limit !== undefined && limit !== 1;
  const shown = [];
  for (const holder of holders.values()) {
    if (holder.expiresAt <= now) continue;
    const entry = { owner: holder.owner, fencingToken: holder.token, ttl: holder.expiresAt - now };
    shown.push(permits ? { ...entry, ...permitsShown(limit, holder.weight) } : entry);
  }
  const waiters = [];
  for (const [owner, entry] of queue) {
    if (now - entry.seenAt <= stale) waiters.push({ owner, since: entry.since });
  }
  if (shown.length === 0 && waiters.length === 0) return null;
  return permits ? { holders: shown, waiters, limit } : { holders: shown, waiters };
}

/** `list` of a store whose objects cannot be enumerated: a TypeError saying so. */
export function cannotList() {
  throw new TypeError(
    'DurableObjectLockStore cannot list keys: a Durable Object namespace has no way to enumerate its objects ' +
      '(one per key); inspect(key) reads one key',
  );
}
