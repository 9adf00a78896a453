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
 * - Shared and exclusive leases (`mode`, as permits of SHARED_LIMIT) are the Web Lock's
 *   own modes (./modes.mjs): readers hold it together, each with its own lease and a
 *   token of its own from the one counter, so every grant's token, a reader's too,
 *   exceeds every token granted before on the origin.
 * - Other limits are counted: each permit is a Web Lock of its own, granted by whoever
 *   holds the key's Web Lock exclusively after counting those held (./limits.mjs).
 */

import { GrantListeners, acquireOptions, checkOptions, checkString, checkTtl, describe } from '../shared/store-support.mjs';
import * as records from './inspect.mjs';
import { permitName, permitsHeld, somePermitReturns } from './limits.mjs';
import { disagreement, keyLimit, leaseKind } from './modes.mjs';

const OPTIONS = ['prefix', 'database'];
const TOKENS = 'tokens';
const LAST_TOKEN = 'last';

const now = () => performance.now();

export class TabLockStore {
  /** Leases held by this tab or worker: key -> owner -> lease (several: readers). */
  #leases = new Map();
  /** Owners of this tab or worker queued in the browser's Web Lock queue: key -> owner -> waiter. */
  #waiters = new Map();
  /** Queued owners whose grant found the key used another way: [key, owner] as JSON -> `{ limit }`, told at their next try. */
  #refused = new Map();
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

  /** Limit, weight and mode: modes as the Web Lock's own (./modes.mjs), other limits counted (./limits.mjs). */
  get permits() {
    return true;
  }

  /**
   * Takes the lease on `key` for `owner` if the origin's holders leave room for it (none
   * for an exclusive or plain lease, only readers for a reader, `weight` of the `limit`
   * for a permit) and nobody waits, and
   * answers `{ fencingToken }`; `{ limit }` when the key is used the other way (plain vs
   * modes); else `undefined` (also for the same owner: not reentrant), after queueing
   * `owner` when `options.queue` is true. A queued owner's later tries answer the lease
   * once it was granted; a try without `queue` takes it out of the queue. Rejects when
   * IndexedDB fails (the Web Lock is then let go).
   */
  async acquire(key, owner, ttlMs, options) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    const { queue, limit, weight } = acquireOptions(options);
    const permits = leaseKind(limit, weight);
    this.#checkOpen();
    const refusal = this.#refused.get(JSON.stringify([key, owner]));
    if (refusal !== undefined) {
      this.#refused.delete(JSON.stringify([key, owner]));
      return refusal;
    }
    const own = this.#live(key, owner);
    if (own?.granted) {
      // A lease granted to this owner while it was queued, asked again: counted from this try.
      this.#extend(own, ttlMs);
      return { fencingToken: own.token };
    }
    if (own !== undefined) return undefined;
    const waiter = this.#waiters.get(key)?.get(owner);
    if (waiter !== undefined) {
      if (queue) return undefined;
      this.#leaveQueue(key, waiter);
    }
    // This tab's own leases and waiters on `key` say exactly how the key is used here.
    const local = [...this.#liveLeases(key), ...(this.#waiters.get(key)?.values() ?? [])];
    const asked = keyLimit(permits.limit);
    const other = local.find((entry) => keyLimit(entry.limit) !== asked);
    if (other !== undefined) return { limit: keyLimit(other.limit) };
    if (local.some((entry) => entry.mode === 'exclusive' || permits.mode === 'exclusive')) {
      // Taken or awaited in this tab in a way this try cannot share: it queues behind like any other.
      if (queue && !this.#closed) this.#enqueue(key, owner, ttlMs, permits);
      return undefined;
    }
    const taken = await this.#ask(key, owner, ttlMs, permits, { ifAvailable: true });
    if (taken?.mismatch !== undefined) return { limit: taken.mismatch };
    if (taken !== undefined) return { fencingToken: taken.token };
    const refused = await disagreement(this.#locks, () => this.#open(), this.#prefix, this.#lockName(key), key, asked);
    if (refused !== undefined) return refused;
    if (queue && !this.#closed) this.#enqueue(key, owner, ttlMs, permits);
    return undefined;
  }

  /** Pushes the expiry of `owner`'s live lease on `key` to now + ttlMs: true. Else false. */
  async renew(key, owner, ttlMs) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    const lease = this.#live(key, owner);
    if (lease === undefined) return false;
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
    this.#refused.delete(JSON.stringify([key, owner]));
    const waiter = this.#waiters.get(key)?.get(owner);
    if (waiter !== undefined) this.#leaveQueue(key, waiter);
    const lease = this.#live(key, owner);
    if (lease === undefined) return false;
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
    return records.inspectTabs(this.#locks, await this.#open(), this.#prefix, key);
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
    return held.some((lock) => lock.name === name) || permitsHeld(held, this.#prefix, key).length > 0;
  }

  /**
   * Lets go of every lease this store holds and leaves every queue, then closes the
   * IndexedDB connection. Later acquires reject.
   */
  async close() {
    this.#closed = true;
    this.#refused.clear();
    for (const [key, waiters] of [...this.#waiters]) for (const waiter of [...waiters.values()]) this.#leaveQueue(key, waiter);
    const leases = [...this.#leases.values()].flatMap((byOwner) => [...byOwner.values()]);
    await Promise.all(leases.map((lease) => this.#end(lease)));
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
   * Asks for `owner`'s lease on `key` as `permits` holds it (`{ mode, limit, weight }`,
   * ./modes.mjs): the key's Web Lock in `mode`, or a counted permit. `lockOptions`:
   * `{ ifAvailable }` for a try, `{ signal }` for a waiter. Resolves the lease;
   * undefined when a try found no room; `{ mismatch: <the key's limit> }` when the key
   * turned out to be used another way. Rejects when aborted or IndexedDB failed.
   */
  #ask(key, owner, ttlMs, permits, lockOptions) {
    if (permits.mode === undefined) return this.#requestPermit(key, owner, ttlMs, permits, lockOptions);
    return this.#request(key, owner, ttlMs, permits, { ...lockOptions, mode: permits.mode });
  }

  /**
   * Asks the browser for the Web Lock `name` (default: the key's) with `lockOptions`;
   * once granted, takes a token and keeps the lock until the lease ends. The key's own
   * lock checks first that no permit lock of the key is held (./limits.mjs): then it
   * resolves `{ mismatch }` and lets the lock go. See #ask for the rest.
   */
  #request(key, owner, ttlMs, permits, lockOptions, name = this.#lockName(key)) {
    return new Promise((resolve, reject) => {
      const held = this.#locks.request(name, lockOptions, async (lock) => {
        if (lock === null) return resolve(undefined);
        const grantedAt = now();
        if (name === this.#lockName(key)) {
          // Holding the key's lock, no permit can be granted: a count now is exact.
          const { held: locks = [] } = await this.#locks.query();
          const permitsOfKey = permitsHeld(locks, this.#prefix, key);
          if (permitsOfKey.length > 0) return resolve({ mismatch: permitsOfKey[0].limit }); // returning lets it go
        }
        const lease = { key, owner, ...permits, token: 0, grantedAt, expiresAt: 0, timer: undefined, end: undefined, released: held, granted: false };
        try {
          lease.token = await this.#nextToken(lease, ttlMs);
        } catch (error) {
          return reject(error); // returning lets the Web Lock go
        }
        const ended = new Promise((end) => (lease.end = end));
        let byOwner = this.#leases.get(key);
        if (byOwner === undefined) this.#leases.set(key, (byOwner = new Map()));
        byOwner.set(owner, lease);
        this.#extend(lease, ttlMs, grantedAt);
        resolve(lease);
        await ended;
      });
      held.catch(reject);
    });
  }

  /**
   * A counted permit (./limits.mjs): holding the key's Web Lock exclusively, counts the
   * permit locks held and takes one of its own when `permits.weight` fits; a waiter
   * that does not fit keeps the key's lock and waits for a permit to return. See #ask.
   */
  #requestPermit(key, owner, ttlMs, permits, lockOptions) {
    return new Promise((resolve, reject) => {
      const gate = this.#locks.request(this.#lockName(key), { ...lockOptions, mode: 'exclusive' }, async (lock) => {
        if (lock === null) return resolve(undefined);
        const returned = new Set(); // permit locks seen let go by their holders (./limits.mjs)
        try {
          for (;;) {
            const { held = [] } = await this.#locks.query();
            const holders = permitsHeld(held, this.#prefix, key).filter((holder) => !returned.has(holder.name));
            const other = holders.find((holder) => holder.limit !== permits.limit);
            if (other !== undefined) return resolve({ mismatch: other.limit });
            const used = holders.reduce((sum, holder) => sum + holder.weight, 0);
            if (used + permits.weight <= permits.limit) {
              const name = permitName(this.#prefix, key, permits.limit, permits.weight, owner);
              // The permit lock is granted (and its token taken) before the key's lock is let go.
              return resolve(await this.#request(key, owner, ttlMs, permits, { ifAvailable: true }, name));
            }
            if (lockOptions.ifAvailable) return resolve(undefined);
            returned.add(await somePermitReturns(this.#locks, holders.map((holder) => holder.name), lockOptions.signal));
          }
        } catch (error) {
          return reject(error); // returning lets the key's lock go
        }
      });
      gate.catch(reject);
    });
  }

  /** The lease ends `ttlMs` after `from` unless renewed: its Web Lock is then let go. */
  #extend(lease, ttlMs, from = now()) {
    lease.expiresAt = from + ttlMs;
    // The holder record (inspect.mjs) was written with the token; a renewal rewrites it.
    if (from !== lease.grantedAt) this.#db?.then((db) => records.renewHolder(db, lease, ttlMs), () => {});
    clearTimeout(lease.timer);
    lease.timer = setTimeout(() => this.#end(lease), Math.max(0, lease.expiresAt - now()));
  }

  /** `owner`'s lease on `key` in this tab while it has not expired; an expired one is ended. */
  #live(key, owner) {
    const lease = this.#leases.get(key)?.get(owner);
    if (lease !== undefined && lease.expiresAt <= now()) {
      this.#end(lease);
      return undefined;
    }
    return lease;
  }

  /** This tab's unexpired leases on `key`; the expired ones are ended. */
  #liveLeases(key) {
    return [...(this.#leases.get(key)?.keys() ?? [])].map((owner) => this.#live(key, owner)).filter((lease) => lease !== undefined);
  }

  /** Ends `lease`: the Web Lock is let go; resolves when the browser has it back. */
  #end(lease) {
    clearTimeout(lease.timer);
    const byOwner = this.#leases.get(lease.key);
    if (byOwner?.get(lease.owner) === lease) {
      byOwner.delete(lease.owner);
      if (byOwner.size === 0) this.#leases.delete(lease.key);
    }
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
  async #nextToken(lease, ttlMs) {
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
        records.putHolder(tx.objectStore(records.HOLDERS), { ...lease, token }, ttlMs);
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

  /** Queues a Web Lock request for `owner` (`permits`: see #request); its grant is offered to the key's listeners. */
  #enqueue(key, owner, ttlMs, permits) {
    let waiters = this.#waiters.get(key);
    if (waiters === undefined) this.#waiters.set(key, (waiters = new Map()));
    const waiter = { owner, ...permits, abort: new AbortController(), refresh: undefined };
    waiters.set(owner, waiter);
    // Its record for `inspect`, kept valid while it waits (inspect.mjs).
    const since = Date.now();
    const record = () =>
      this.#open().then((db) => {
        if (this.#waiters.get(key)?.get(owner) === waiter) records.putWaiter(db, key, owner, since);
      }, () => {});
    record();
    waiter.refresh = setInterval(record, records.REFRESH_MS);
    this.#ask(key, owner, ttlMs, permits, { signal: waiter.abort.signal }).then(
      (lease) => {
        const queued = this.#waiters.get(key)?.get(owner) === waiter;
        if (queued) this.#forget(key, waiter);
        if (lease === undefined) return;
        if (lease.mismatch !== undefined) {
          if (queued) this.#refused.set(JSON.stringify([key, owner]), { limit: lease.mismatch });
          return;
        }
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
