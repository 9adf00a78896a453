// Type declarations for `leasehold/etcd`. Written by hand; they import nothing from
// `etcd3`: the client is described by the few members the store uses.
import type { AcquireAnswer, InspectableStore, ListOptions, LockInspection, PermitRequest } from './index';

/**
 * An `Etcd3` client from the `etcd3` package (1.x), or one of its namespaces
 * (`client.namespace('app/')`, whose prefix then comes first in every key).
 */
export interface Etcd3Like {
  readonly watchClient: { watch(): Promise<any> };
  readonly kv: { txn(request: object): Promise<any>; range(request: object): Promise<any> };
  readonly leaseClient: {
    leaseGrant(request: object): Promise<any>;
    leaseRevoke(request: object): Promise<any>;
    leaseKeepAlive(): Promise<any>;
    leaseTimeToLive(request: object): Promise<any>;
  };
}

export interface EtcdLockStoreOptions {
  /** An `Etcd3` client (or a namespace of one). The store uses its connections and never closes it. */
  client: Etcd3Like;
  /**
   * The first part of every key: the lock key `k` is `${prefix}/${k}/` (with `/` and `%`
   * in `k` written `%2F` and `%25`), and each holder and waiter has a key under it.
   * @default 'leasehold'
   */
  prefix?: string;
}

/** A lock handed to a waiter, as the store passes it to its `subscribe` listener. */
export interface EtcdLockGrant {
  owner: string;
  fencingToken: number;
  /** At most how long ago (ms) the lease was last refreshed. */
  age: number;
}

/**
 * A lock store on etcd (v3 API), the way etcd's own `concurrency.Mutex` works.
 *
 * - The holder is the key under the lock's prefix with the lowest create revision; the
 *   fencing token is that create revision: strictly increasing across the cluster, with
 *   no clock involved.
 * - A lease per holder, of the lock's ttl rounded up to whole seconds (etcd leases count
 *   seconds; a server raises a TTL below its minimum). `renew` is one keep-alive;
 *   `release` deletes the owner's key in a transaction that compares its value.
 * - Waiters (`acquire(..., { queue: true })`, as the engine asks) keep a key of their own
 *   and watch the deletion of the key just before theirs: served in create-revision
 *   order across processes, one watcher each, no polling.
 * - Permits (`{ limit, weight }`; modes arrive as permits of 2147483647): each holder and
 *   waiter keeps a key (and a lease) of its own; a key holds when the weights of the keys
 *   up to it in create-revision order fit in the limit (FIFO). A waiter watches one key
 *   or range. Keys of two limits are never on a lock at once: `{ limit }` answers.
 * - etcd and client errors reject unchanged; `false` from `renew`/`release` always means
 *   the owner's lease is gone.
 * - Invalid arguments: `TypeError` or `RangeError`, naming the argument.
 */
export declare class EtcdLockStore implements InspectableStore {
  /** @throws {TypeError} when `client` or `prefix` is invalid, or an option name is unknown. */
  constructor(options: EtcdLockStoreOptions);

  readonly prefix: string;
  /** Always true: waiters are handed the lock in their turn. */
  readonly grantsOnRelease: true;
  /** Always true: limits, weights and shared/exclusive modes. */
  readonly permits: true;

  /**
   * Takes the lock if nobody holds or waits for it; `undefined` when held (locks are not
   * reentrant). With `{ queue: true }` the owner stays queued and is handed the lock in
   * its turn (through `subscribe`); asked again, it answers `undefined` while the owner
   * waits and the lease once it was handed over. With `limit` and `weight` (integers,
   * 1 <= weight <= limit <= 2147483647), `weight` of the key's `limit` permits; `{ limit }`
   * (the key's) when it is held or awaited with another limit (a plain lock's is 1).
   * @throws {TypeError} when `queue` is not a boolean; {RangeError} for a bad `limit`/`weight`.
   */
  acquire(key: string, owner: string, ttlMs: number, options?: PermitRequest): Promise<AcquireAnswer | undefined>;

  /** One keep-alive of the owner's lease (a new lease when `ttlMs` is longer than it keeps); `false` when it is gone. */
  renew(key: string, owner: string, ttlMs: number): Promise<boolean>;

  /** Deletes the owner's key (compared by value); `false` when it was gone or is someone else's. */
  release(key: string, owner: string): Promise<boolean>;

  /** Whether anyone holds (or is about to hold) the lock (advisory). */
  isLocked(key: string): Promise<boolean>;

  /** Milliseconds left on the holder's lease, in whole seconds; `undefined` when free (advisory). */
  ttl(key: string): Promise<number | undefined>;

  /**
   * The holders (their create revisions are their tokens; time left in whole seconds),
   * each with its `weight` (and `mode`) and the key's `limit` when held with permits, and
   * the waiters in queue order (etcd records no time: no `since`).
   */
  inspect(key: string): Promise<LockInspection | undefined>;

  /** The keys held, by range reads of 500 names, in the order of their etcd names. */
  list(options?: ListOptions): AsyncIterable<string>;

  /**
   * Calls `onReleased` with a grant when the lock on `key` comes to one of this store's
   * waiters; return true to claim it (a grant nobody claims is released at once).
   * @returns a function that removes this listener (idempotent).
   */
  subscribe(key: string, onReleased: (grant: EtcdLockGrant) => boolean | void): () => void;

  /**
   * Takes this store's waiters out of their queues, revokes the leases it kept for reuse
   * and ends its keep-alive stream. Call it before `client.close()`.
   */
  close(): Promise<void>;
}
