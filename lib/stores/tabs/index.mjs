/**
 * `leasehold/tabs`: a `LockStore` shared by the tabs, iframes and workers of one origin
 * in a browser, on the Web Locks API (`navigator.locks`) and IndexedDB. Plain JavaScript
 * with no dependency; it works in a page and in a dedicated or shared worker.
 *
 * What it promises
 * - Exclusion across the origin: a lease on key `k` is the held Web Lock
 *   `${prefix}:${k}`, so at most one tab or worker holds it, whatever engine instance
 *   asked. The browser ends it when the holding tab or worker goes away (closed,
 *   crashed, navigated), and hands it to the next request in arrival order.
 * - Fencing tokens only ever increase across the whole origin: one counter in the
 *   IndexedDB database `database`, read, incremented and written in one transaction by
 *   the tab that was just granted the Web Lock, before the lease is handed out. A token
 *   is also at least the wall clock in microseconds, so tokens keep increasing when
 *   the site's data (and the counter with it) is cleared, as long as the clock does not
 *   step back past the last token issued.
 * - ttl: the Web Lock has none. The lease ends at the earliest of its release, the end
 *   of its tab or worker, and `ttl` ms without a renewal, counted on the holder's own
 *   clock from when the lease was granted or last renewed: the holder's store then lets
 *   the Web Lock go. A holder whose event loop was paused (a frozen or throttled tab, a
 *   long task) keeps the Web Lock until its timers run again, so the key may stay taken
 *   past the ttl, never freed before it; once past it, `renew` answers false and the
 *   next waiter is granted the key with a larger token. Fence writes with the token.
 * - Grant on release: a try that asks to be queued (`{ queue: true }`, as the engine
 *   does for a waiter) and finds the key held queues a Web Lock request; when the
 *   browser grants it, the store takes a token and offers the lease to its `subscribe`
 *   listeners. So waiters across the origin are served in the order they queued, with
 *   no polling.
 * - `renew` and `release` act only on leases of this store's tab or worker: a lease
 *   taken in another tab is never this one's to end (the Web Lock is bound to its
 *   holder).
 */

import { GrantListeners, checkOptions, checkString, checkTtl, describe } from '../shared/store-support.mjs';
import * as records from './inspect.mjs';

const OPTIONS = ['prefix', 'database'];
const TOKENS = 'tokens';
const LAST_TOKEN = 'last';

const now = () => performance.now();

export class TabLockStore {
  /** Leases held by this tab or worker: key -> lease. */
  #leases = new Map();
  /** Owners of this tab or worker queued in the browser's Web Lock queue: key -> owner -> waiter. */
  #waiters = new Map();
  #listeners = new GrantListeners();
  #locks;
  #indexedDB;
  #prefix;
  #database;
  /** The open IndexedDB connection, as a Promise; undefined until first used or after it closed. */
  #db;
  #closed = false;

  /**
   * @param {{ prefix?: string, database?: string }} [options] `prefix` (default
   * `'leasehold'`) names the Web Locks (`${prefix}:${key}`); `database` (default
   * `'leasehold'`) is the IndexedDB database holding the token counter. Stores with the
   * same prefix exclude each other; give them the same database too.
   */
  constructor(options = {}) {
    checkOptions(options, OPTIONS, 'TabLockStore');
    const { prefix = 'leasehold', database = 'leasehold' } = options;
    checkString('prefix', prefix);
    checkString('database', database);
    if (prefix.startsWith('-')) throw new TypeError(`prefix must not start with "-" (Web Lock names may not), got ${describe(prefix)}`);
    const locks = globalThis.navigator?.locks;
    const indexedDB = globalThis.indexedDB;
    if (typeof locks?.request !== 'function' || typeof indexedDB?.open !== 'function') {
      throw new TypeError(
        'TabLockStore needs navigator.locks and indexedDB: a browser page or worker in a secure context ' +
          '(https or localhost); elsewhere use MemoryLockStore or a server-side store',
      );
    }
    this.#locks = locks;
    this.#indexedDB = indexedDB;
    this.#prefix = prefix;
    this.#database = database;
  }

  /** The engine queues waiters here and is handed the lease on release (see `subscribe`). */
  get grantsOnRelease() {
    return true;
  }

  /**
   * Takes the lease on `key` for `owner` if no one in the origin holds it, and answers
   * `{ fencingToken }`; else `undefined` (also for the same owner: not reentrant), after
   * queueing `owner` when `options.queue` is true. A queued owner's later tries answer
   * the lease once it was granted; a try without `queue` takes it out of the queue.
   * Rejects when IndexedDB fails (the Web Lock is then let go).
   */
  async acquire(key, owner, ttlMs, options) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    this.#checkOpen();
    const queue = options?.queue === true;
    const lease = this.#live(key);
    if (lease?.owner === owner && lease.granted) {
      // A lease granted to this owner while it was queued, asked again: counted from this try.
      this.#extend(lease, ttlMs);
      return { fencingToken: lease.token };
    }
    const waiter = this.#waiters.get(key)?.get(owner);
    if (waiter !== undefined) {
      if (queue) return undefined;
      this.#leaveQueue(key, waiter);
    }
    if (lease !== undefined) {
      // Held in this tab: the owner queues behind it like any other.
      if (queue && !this.#closed) this.#enqueue(key, owner, ttlMs);
      return undefined;
    }
    const taken = await this.#request(key, owner, ttlMs, { ifAvailable: true });
    if (taken !== undefined) return { fencingToken: taken.token };
    if (queue && !this.#closed) this.#enqueue(key, owner, ttlMs);
    return undefined;
  }

  /** Pushes the expiry of `owner`'s live lease on `key` to now + ttlMs: true. Else false. */
  async renew(key, owner, ttlMs) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    const lease = this.#live(key);
    if (lease === undefined || lease.owner !== owner) return false;
    this.#extend(lease, ttlMs);
    return true;
  }

  /**
   * Ends `owner`'s lease on `key` and resolves once the Web Lock is let go: true when the
   * lease was live. A queued owner leaves the queue (false).
   */
  async release(key, owner) {
    checkString('key', key);
    checkString('owner', owner);
    const waiter = this.#waiters.get(key)?.get(owner);
    if (waiter !== undefined) this.#leaveQueue(key, waiter);
    const lease = this.#live(key);
    if (lease === undefined || lease.owner !== owner) return false;
    await this.#end(lease);
    return true;
  }

  /**
   * Calls `onReleased(grant)` (`{ owner, fencingToken, age }`) when the browser granted
   * `key` to an owner this store queued; the listener returns true to claim it. A grant
   * no listener claims is let go at once, so that it passes on. Returns a function that
   * removes the listener (idempotent).
   */
  subscribe(key, onReleased) {
    return this.#listeners.add(key, onReleased);
  }

  /** Who holds `key` in the origin and who waits, from the Web Locks and their records (inspect.mjs). */
  async inspect(key) {
    checkString('key', key);
    return records.inspectTabs(this.#locks, await this.#open(), this.#lockName(key), key);
  }

  /** The keys held in the origin under this store's prefix that start with `prefix`. */
  list(options = {}) {
    checkOptions(options, ['prefix', 'limit'], 'list');
    const { prefix = '', limit = Infinity } = options;
    if (typeof prefix !== 'string') throw new TypeError(`prefix must be a string, got ${describe(prefix)}`);
    if (limit !== Infinity && !(Number.isSafeInteger(limit) && limit >= 0)) {
      throw new RangeError(`limit must be a non-negative integer (or Infinity), got ${describe(limit)}`);
    }
    return records.listTabs(this.#locks, this.#prefix, prefix, limit);
  }

  /** Whether any tab or worker of the origin holds the lease on `key` (advisory). */
  async isLocked(key) {
    checkString('key', key);
    const { held = [] } = await this.#locks.query();
    const name = this.#lockName(key);
    return held.some((lock) => lock.name === name);
  }

  /**
   * Lets go of every lease this store holds and leaves every queue, then closes the
   * IndexedDB connection. Later acquires reject.
   */
  async close() {
    this.#closed = true;
    for (const [key, waiters] of [...this.#waiters]) for (const waiter of [...waiters.values()]) this.#leaveQueue(key, waiter);
    await Promise.all([...this.#leases.values()].map((lease) => this.#end(lease)));
    const db = this.#db;
    this.#db = undefined;
    if (db) (await db.catch(() => undefined))?.close();
  }

  // ---- leases ---------------------------------------------------------------------

  #lockName(key) {
    return `${this.#prefix}:${key}`;
  }

  #checkOpen() {
    if (this.#closed) throw new Error('this TabLockStore is closed');
  }

  /**
   * Asks the browser for the Web Lock of `key` with `lockOptions`; once granted, takes a
   * token and keeps the lock until the lease ends. Resolves the lease, or undefined when
   * `ifAvailable` found it held; rejects when the request was aborted or IndexedDB failed.
   */
  #request(key, owner, ttlMs, lockOptions) {
    return new Promise((resolve, reject) => {
      const held = this.#locks.request(this.#lockName(key), lockOptions, async (lock) => {
        if (lock === null) return resolve(undefined);
        const grantedAt = now();
        let token;
        try {
          token = await this.#nextToken(key, owner, ttlMs);
        } catch (error) {
          return reject(error); // returning lets the Web Lock go
        }
        const lease = { key, owner, token, grantedAt, expiresAt: 0, timer: undefined, end: undefined, released: held, granted: false };
        const ended = new Promise((end) => (lease.end = end));
        this.#leases.set(key, lease);
        this.#extend(lease, ttlMs, grantedAt);
        resolve(lease);
        await ended;
      });
      held.catch(reject);
    });
  }

  /** The lease ends `ttlMs` after `from` unless renewed: its Web Lock is then let go. */
  #extend(lease, ttlMs, from = now()) {
    lease.expiresAt = from + ttlMs;
    // The holder record (inspect.mjs) was written with the token; a renewal rewrites it.
    if (from !== lease.grantedAt) this.#db?.then((db) => records.renewHolder(db, lease.key, lease.owner, lease.token, ttlMs), () => {});
    clearTimeout(lease.timer);
    lease.timer = setTimeout(() => this.#end(lease), Math.max(0, lease.expiresAt - now()));
  }

  /** This tab's lease on `key` while it has not expired; an expired one is ended. */
  #live(key) {
    const lease = this.#leases.get(key);
    if (lease !== undefined && lease.expiresAt <= now()) {
      this.#end(lease);
      return undefined;
    }
    return lease;
  }

  /** Ends `lease`: the Web Lock is let go; resolves when the browser has it back. */
  #end(lease) {
    clearTimeout(lease.timer);
    if (this.#leases.get(lease.key) === lease) this.#leases.delete(lease.key);
    this.#db?.then((db) => records.dropHolder(db, lease.key, lease.owner), () => {});
    lease.end();
    return lease.released.then(
      () => undefined,
      () => undefined,
    );
  }

  /**
   * The next fencing token of the origin: the stored counter + 1, at least the wall
   * clock in microseconds, written back in the same readwrite transaction (IndexedDB
   * runs those one at a time), and handed out only once the transaction committed.
   */
  async #nextToken(key, owner, ttlMs) {
    const db = await this.#open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction([TOKENS, records.HOLDERS], 'readwrite');
      const tokens = tx.objectStore(TOKENS);
      const read = tokens.get(LAST_TOKEN);
      let token;
      read.onsuccess = () => {
        const last = Number.isSafeInteger(read.result) ? read.result : 0;
        token = Math.max(last + 1, Date.now() * 1000);
        tokens.put(token, LAST_TOKEN);
        records.putHolder(tx.objectStore(records.HOLDERS), key, owner, token, ttlMs);
      };
      tx.oncomplete = () => resolve(token);
      tx.onabort = () => reject(tx.error ?? new Error('the IndexedDB transaction issuing a fencing token was aborted'));
    });
  }

  #open() {
    if (this.#db === undefined) {
      const opening = new Promise((resolve, reject) => {
        // Version 2 adds the records `inspect` reads (inspect.mjs).
        const request = this.#indexedDB.open(this.#database, 2);
        request.onupgradeneeded = () => {
          const db = request.result;
          if (!db.objectStoreNames.contains(TOKENS)) db.createObjectStore(TOKENS);
          records.addInspectStores(db);
        };
        request.onsuccess = () => {
          const db = request.result;
          // Another tab deletes or upgrades the database (site data cleared): let it,
          // and open it afresh next time.
          db.onversionchange = () => {
            db.close();
            if (this.#db === opening) this.#db = undefined;
          };
          resolve(db);
        };
        request.onerror = () => reject(request.error);
      });
      opening.catch(() => {
        if (this.#db === opening) this.#db = undefined;
      });
      this.#db = opening;
    }
    return this.#db;
  }

  // ---- queue ----------------------------------------------------------------------

  /** Queues a Web Lock request for `owner`; its grant is offered to the key's listeners. */
  #enqueue(key, owner, ttlMs) {
    let waiters = this.#waiters.get(key);
    if (waiters === undefined) this.#waiters.set(key, (waiters = new Map()));
    const waiter = { owner, abort: new AbortController(), refresh: undefined };
    waiters.set(owner, waiter);
    // Its record for `inspect`, kept valid while it waits (inspect.mjs).
    const since = Date.now();
    const record = () =>
      this.#open().then((db) => {
        if (this.#waiters.get(key)?.get(owner) === waiter) records.putWaiter(db, key, owner, since);
      }, () => {});
    record();
    waiter.refresh = setInterval(record, records.REFRESH_MS);
    this.#request(key, owner, ttlMs, { signal: waiter.abort.signal }).then(
      (lease) => {
        const queued = this.#waiters.get(key)?.get(owner) === waiter;
        if (queued) this.#forget(key, waiter);
        if (!queued || !this.#offer(lease)) this.#end(lease);
      },
      () => this.#forget(key, waiter), // aborted while queued, or IndexedDB failed: the next try queues again
    );
  }

  /** Offers a lease granted to a queued owner; true when a listener claimed it. */
  #offer(lease) {
    lease.granted = true;
    const grant = { owner: lease.owner, fencingToken: lease.token, age: Math.max(0, now() - lease.grantedAt) };
    return this.#listeners.offer(lease.key, grant);
  }

  #leaveQueue(key, waiter) {
    this.#forget(key, waiter);
    waiter.abort.abort();
  }

  #forget(key, waiter) {
    const waiters = this.#waiters.get(key);
    if (waiters?.get(waiter.owner) !== waiter) return;
    clearInterval(waiter.refresh);
    this.#db?.then((db) => records.dropWaiter(db, key, waiter.owner), () => {});
    waiters.delete(waiter.owner);
    if (waiters.size === 0) this.#waiters.delete(key);
  }
}
