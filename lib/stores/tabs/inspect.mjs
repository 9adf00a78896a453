/**
 * `inspect` and `list` of `TabLockStore` (index.mjs): who holds a key across the tabs
 * and workers of the origin, and who waits for it.
 *
 * The Web Locks API says which locks are held and how many requests wait
 * (`navigator.locks.query()`), not by whom: the owners come from records the stores keep
 * in the origin's IndexedDB database next to the token counter.
 * - HOLDERS, [key, owner] -> { owner, token, expiresAt, limit, weight }: written in the
 *   transaction that issues a holder's token (so a holder always has its record before
 *   its lease is handed out), rewritten at each renewal, deleted when its lease ends.
 *   `limit` and `weight` are a reader's or writer's permits (./modes.mjs), undefined
 *   for a plain lease. Shown only while the Web Lock is held, at most as many as hold
 *   it (the latest grants): a tab that crashed leaves a record, never a lock. (Records
 *   of an earlier release, keyed by the key alone, fall outside every [key] range.)
 * - WAITERS, [key, owner] -> { since, validUntil }: written when a store queues an
 *   owner, its validity pushed forward every REFRESH_MS while it waits, deleted when it
 *   is granted or leaves. A record whose tab went away stops being valid within
 *   VALID_MS. Waiters are shown in the order they queued (`since`: the tabs share one
 *   clock), at most as many as the Web Lock queue holds for the key.
 * Reading changes nothing; the records are advisory, as every inspection is.
 */

import { permitsShown } from '../shared/store-support.mjs';
import { parsePermitName, permitsHeld } from './limits.mjs';

export const HOLDERS = 'holders';
export const WAITERS = 'waiters';
export const REFRESH_MS = 1_000;
const VALID_MS = 3_000;

/** Creates the object stores a database of `version` 2 has and `db` lacks. */
export function addInspectStores(db) {
  if (!db.objectStoreNames.contains(HOLDERS)) db.createObjectStore(HOLDERS);
  if (!db.objectStoreNames.contains(WAITERS)) db.createObjectStore(WAITERS);
}

/** Runs `fn(stores)` in a readwrite transaction of its own; failures only lose a record. */
function write(db, names, fn) {
  try {
    const tx = db.transaction(names, 'readwrite');
    fn(...names.map((n) => tx.objectStore(n)));
  } catch {
    // the database was closed or deleted meanwhile (site data cleared)
  }
}

/** A lease's holder record, rewritten (at a grant's token or a renewal). */
export function putHolder(store, { key, owner, token, limit, weight }, ttlMs) {
  store.put({ owner, token, expiresAt: Date.now() + ttlMs, limit, weight }, [key, owner]);
}

export function renewHolder(db, lease, ttlMs) {
  write(db, [HOLDERS], (holders) => putHolder(holders, lease, ttlMs));
}

/** Deletes `owner`'s holder record of `key`. */
export function dropHolder(db, key, owner) {
  write(db, [HOLDERS], (holders) => holders.delete([key, owner]));
}

/** The [key, …] range of a store keyed by [key, owner]. */
const ofKey = (key) => IDBKeyRange.bound([key], [key, []]);

/** The unexpired holder records of `key`, oldest grant first. */
async function holderRecords(tx, key) {
  const now = Date.now();
  const found = await request(tx.objectStore(HOLDERS).getAll(ofKey(key)));
  return found.filter((record) => record.expiresAt > now).sort((a, b) => a.token - b.token);
}

/** The unexpired holder record of `key` granted last, or undefined. */
export async function latestHolder(db, key) {
  return (await holderRecords(db.transaction(HOLDERS, 'readonly'), key)).at(-1);
}

/** Writes (or refreshes) `owner`'s waiter record of `key`, queued `since`. */
export function putWaiter(db, key, owner, since) {
  write(db, [WAITERS], (waiters) => waiters.put({ since, validUntil: Date.now() + VALID_MS }, [key, owner]));
}

export function dropWaiter(db, key, owner) {
  write(db, [WAITERS], (waiters) => waiters.delete([key, owner]));
}

function request(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

/**
 * `{ key, holders, waiters, limit? }` of `key` under the store's `prefix`; undefined
 * when none. Holders oldest grant first, with their weight (and mode on a key used with
 * modes) and the key's `limit` on a key held with permits. On a key with permit locks
 * (./limits.mjs), its own lock is held by the first waiter, not a holder.
 */
export async function inspectTabs(locks, db, prefix, key) {
  const name = `${prefix}:${key}`;
  const { held = [], pending = [] } = await locks.query();
  const permits = permitsHeld(held, prefix, key).length;
  let holding = held.filter((lock) => lock.name === name).length;
  let queued = pending.filter((lock) => lock.name === name).length;
  if (permits > 0) {
    queued += holding;
    holding = permits;
  }
  if (holding === 0 && queued === 0) return undefined;
  const tx = db.transaction([HOLDERS, WAITERS], 'readonly');
  const [holderList, records, ids] = await Promise.all([
    holderRecords(tx, key),
    request(tx.objectStore(WAITERS).getAll(ofKey(key))),
    request(tx.objectStore(WAITERS).getAllKeys(ofKey(key))),
  ]);
  const now = Date.now();
  const live = holderList.slice(Math.max(0, holderList.length - holding));
  const holders = live.map((record) => {
    const shown = { owner: record.owner, fencingToken: record.token, ttl: record.expiresAt - now };
    return record.limit === undefined ? shown : { ...shown, ...permitsShown(record.limit, record.weight) };
  });
  const waiters = records
    .map((record, i) => ({ owner: ids[i][1], since: record.since, validUntil: record.validUntil }))
    .filter((w) => w.validUntil >= now)
    .sort((a, b) => a.since - b.since)
    .slice(0, queued)
    .map(({ owner, since }) => ({ owner, since }));
  const limit = live.find((record) => record.limit !== undefined)?.limit;
  return limit === undefined ? { key, holders, waiters } : { key, holders, waiters, limit };
}

/** The keys held in the origin under `prefix` (the store's) that start with `start`. */
export async function* listTabs(locks, prefix, start, limit) {
  const { held = [] } = await locks.query();
  const keys = new Set();
  for (const { name } of held) {
    // A key's own Web Lock, or a permit lock of a key held with limit (./limits.mjs).
    const key = name.startsWith(`${prefix}:`) ? name.slice(prefix.length + 1) : parsePermitName(prefix, name)?.key;
    if (typeof key === 'string' && key.startsWith(start)) keys.add(key);
  }
  let left = limit;
  for (const key of keys) {
    if (left <= 0) return;
    left -= 1;
    yield key;
  }
}
