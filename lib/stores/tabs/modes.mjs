/**
 * Permits on `TabLockStore` (./index.mjs), as the key's Web Lock carries them:
 * - shared and exclusive leases are the Web Locks API's own modes: a reader (weight 1
 *   of SHARED_LIMIT) holds the key's Web Lock 'shared', a writer (all SHARED_LIMIT) and
 *   a plain lease 'exclusive'; the browser keeps readers together, a writer alone, and
 *   grants in arrival order (a shared request is not granted past a waiting exclusive);
 * - any other limit is counted with permit locks (./limits.mjs).
 * A key is used one way at a time: a try that finds it used another is answered
 * `{ limit }` (disagreement; index.mjs checks again at each grant).
 */
import { SHARED_LIMIT, describe } from '../shared/store-support.mjs';
import { latestHolder } from './inspect.mjs';
import { permitsHeld } from './limits.mjs';

/**
 * How a lease of `weight` of `limit` (both undefined: a plain lease) holds the key:
 * `{ mode, limit, weight }`, `mode` the Web Lock's for plain and shared/exclusive
 * leases, undefined for counted permits; `limit` and `weight` undefined for a plain one.
 */
export function leaseKind(limit, weight) {
  if (limit === undefined || limit === 1) return { mode: 'exclusive', limit: undefined, weight: undefined };
  if (limit !== SHARED_LIMIT) return { mode: undefined, limit, weight };
  if (weight === 1) return { mode: 'shared', limit, weight };
  if (weight === SHARED_LIMIT) return { mode: 'exclusive', limit, weight };
  throw new TypeError(
    `TabLockStore takes ${SHARED_LIMIT} permits as modes only: weight 1 (shared) or ${SHARED_LIMIT} (exclusive), got weight ${describe(weight)}`,
  );
}

/** The limit of a lease's key as the store protocol counts it: 1 for a plain lease. */
export const keyLimit = (limit) => limit ?? 1;

/**
 * `{ limit }` when `key`, whose Web Lock is `name` and whose permit locks are under
 * `prefix`, is held or awaited in the origin with a limit other than `asked`, else
 * undefined. Read after a try found the key taken: permit locks say their limit; shared
 * locks (held or queued) mean modes; an exclusive holder's own record (written with its
 * token) says whether it is plain or a writer. Advisory, as a query is: a grant checks
 * again what it must (./index.mjs).
 */
export async function disagreement(locks, openDb, prefix, name, key, asked) {
  const { held = [], pending = [] } = await locks.query();
  const permits = permitsHeld(held, prefix, key);
  if (permits.length > 0) return permits[0].limit === asked ? undefined : { limit: permits[0].limit };
  const ours = [...held, ...pending].filter((lock) => lock.name === name);
  if (asked !== SHARED_LIMIT && ours.some((lock) => lock.mode === 'shared')) return { limit: SHARED_LIMIT };
  if (!held.some((lock) => lock.name === name && lock.mode === 'exclusive')) return undefined;
  const holder = await latestHolder(await openDb(), key);
  if (holder === undefined) return undefined; // granted, its token not yet written
  const theirs = keyLimit(holder.limit);
  return theirs === asked ? undefined : { limit: theirs };
}
