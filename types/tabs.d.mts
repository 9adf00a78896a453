// Type declarations for `leasehold/tabs`. Written by hand.
import type { AcquireAnswer, InspectableStore, ListOptions, LockGrant, LockInspection, LockStore, PermitRequest } from './index.mjs';

export interface TabLockStoreOptions {
  /** Names the Web Locks: the lease on `key` is the lock `${prefix}:${key}`. Default `'leasehold'`. */
  prefix?: string;
  /** The IndexedDB database that keeps the origin's fencing-token counter. Default `'leasehold'`. */
  database?: string;
}

/**
 * A lock store for the tabs, iframes and workers of one origin: exclusion and FIFO
 * hand-over through `navigator.locks`, fencing tokens from one IndexedDB counter. A lease
 * ends at its release, when its tab or worker goes away, or `ttl` ms after it was last
 * granted or renewed (on the holder's clock, which may run late in a frozen or throttled
 * tab, never early). Throws a TypeError where `navigator.locks` or `indexedDB` is missing.
 */
export declare class TabLockStore implements LockStore, InspectableStore {
  constructor(options?: TabLockStoreOptions);
  readonly grantsOnRelease: true;
  /**
   * Keeps permits: `mode` as the Web Lock's own modes; `limit` and `weight` as one Web
   * Lock per permit, granted by whoever holds the key's Web Lock after counting them.
   */
  readonly permits: true;
  /** `{ limit }`: the key is held or awaited with another limit in the origin (a plain lease's is 1). */
  acquire(
    key: string,
    owner: string,
    ttlMs: number,
    options?: PermitRequest,
  ): Promise<AcquireAnswer | undefined>;
  renew(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** True when `owner`'s lease was live; resolves once the Web Lock is let go. */
  release(key: string, owner: string): Promise<boolean>;
  subscribe(key: string, onReleased: (grant?: LockGrant) => boolean | void): () => void;
  /** Whether any tab or worker of the origin holds `key` (advisory). */
  isLocked(key: string): Promise<boolean>;
  /** Lets go of this store's leases, leaves its queues, closes its IndexedDB connection. */
  close(): Promise<void>;
  /**
   * Who holds `key` in the origin (from the Web Lock and the holder's record in
   * IndexedDB) and who waits, in the order they queued; `undefined` when none.
   */
  inspect(key: string): Promise<LockInspection | undefined>;
  /** The keys held in the origin under this store's prefix (`navigator.locks.query()`). */
  list(options?: ListOptions): AsyncIterable<string>;
}
