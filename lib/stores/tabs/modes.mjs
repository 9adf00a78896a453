/**
 * Permits on `TabLockStore` (./index.mjs): shared and exclusive leases, as the Web Locks
 * API's own modes. A reader (weight 1 of SHARED_LIMIT) holds the key's Web Lock in
 * 'shared' mode, a writer (all SHARED_LIMIT) and a plain lease in 'exclusive' mode; the
 * browser keeps readers together, a writer alone, and grants in arrival order (a shared
 * request is not granted past a waiting exclusive one). Any other `limit` is refused:
 * navigator.locks counts no holders, and n named locks taken one by one would neither
 * keep weights nor the queue's order.
 */
import { SHARED_LIMIT, describe } from '../shared/store-support.mjs';
import { latestHolder } from './inspect.mjs';

/** The Web Lock mode of a lease of `weight` of `limit` (both undefined: a plain lease); a TypeError for other limits. */
export function lockMode(limit, weight) {
  if (limit === undefined || (limit === 1 && weight === 1)) return 'exclusive';
  if (limit === SHARED_LIMIT && weight === 1) return 'shared';
  if (limit === SHARED_LIMIT && weight === SHARED_LIMIT) return 'exclusive';
  throw new TypeError(
    `TabLockStore does shared and exclusive leases only (mode: 'shared' | 'exclusive'), not limit ${describe(limit)} ` +
      `with weight ${describe(weight)}: navigator.locks has no count of holders that could be kept with fencing tokens; ` +
      'use a server-side store for limit',
  );
}

/** The limit of a lease's key as the store protocol counts it: 1 for a plain lease. */
export const keyLimit = (limit) => limit ?? 1;

/**
 * `{ limit }` when the key whose Web Lock is `name` is held or awaited in the origin with
 * a limit other than `asked` (1: plain leases; SHARED_LIMIT: modes), else undefined. Read
 * after a try found the key taken: shared locks (held or queued) mean modes; an exclusive
 * holder's own record (written with its token) says whether it is plain. Advisory, as a
 * query is: exclusion never depends on it (a plain lease is an exclusive Web Lock).
 */
export async function disagreement(locks, openDb, name, key, asked) {
  const { held = [], pending = [] } = await locks.query();
  const ours = [...held, ...pending].filter((lock) => lock.name === name);
  if (asked !== SHARED_LIMIT && ours.some((lock) => lock.mode === 'shared')) return { limit: SHARED_LIMIT };
  if (!held.some((lock) => lock.name === name && lock.mode === 'exclusive')) return undefined;
  const holder = await latestHolder(await openDb(), key);
  if (holder === undefined) return undefined; // granted, its token not yet written
  const theirs = keyLimit(holder.limit);
  return theirs === asked ? undefined : { limit: theirs };
}
