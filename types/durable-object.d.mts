// Type declarations for `leasehold/durable-object` (Cloudflare Workers). Written by hand;
// they import nothing from @cloudflare/workers-types: the binding and the object's
// context are described by the few members used.
import type { AcquireAnswer, InspectedHolder, InspectedWaiter, LockGrant, LockInspection, LockStore, PermitRequest } from './index.mjs';

/** The part of a Durable Object namespace binding (`env.LOCKS`) the store uses. */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: any): any;
}

/**
 * The holders of one lock key (one lease, or permits of its limit), kept in the object's
 * storage with the key's last fencing token. Export it from your Worker and bind it as a
 * Durable Object namespace.
 */
export declare class LockDurableObject {
  constructor(ctx: any, env: unknown);
  /** `{ limit }`: the key is held or awaited with another limit (a plain lease's is 1). */
  acquire(
    owner: string,
    ttlMs: number,
    options?: PermitRequest,
  ): AcquireAnswer | null;
  renew(owner: string, ttlMs: number): boolean;
  release(owner: string): boolean;
  /** Answers when the lease is handed to `owner` (queued by an acquire), or null when it left the queue. */
  wait(owner: string): { fencingToken: number } | null | Promise<{ fencingToken: number } | null>;
  isLocked(): boolean;
  ttl(): number | undefined;
  queueLength(): number;
  /** The live holders and the queued owners still asking, read only; null when neither. */
  inspect(): { holders: InspectedHolder[]; waiters: InspectedWaiter[]; limit?: number } | null;
}

export interface DurableObjectLockStoreOptions {
  /** The Durable Object namespace bound to `LockDurableObject`. */
  namespace: DurableObjectNamespaceLike;
  /** The object of key `k` is the one named `${prefix}:${k}`. Default `'leasehold'`. */
  prefix?: string;
}

/**
 * A `LockStore` on `LockDurableObject`: one RPC per acquire, renew and release; waiters
 * are handed the lease, or permits (`limit`, `weight`, `mode`) from the queue's head.
 */
export declare class DurableObjectLockStore implements LockStore {
  constructor(options: DurableObjectLockStoreOptions);
  readonly grantsOnRelease: true;
  /** Keeps permits: `limit`, `weight` and `mode`. */
  readonly permits: true;
  acquire(
    key: string,
    owner: string,
    ttlMs: number,
    options?: PermitRequest,
  ): Promise<AcquireAnswer | undefined>;
  renew(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  subscribe(key: string, onReleased: (grant?: LockGrant) => boolean | void): () => void;
  isLocked(key: string): Promise<boolean>;
  /** Milliseconds until the last live holder's lease ends unless renewed, `undefined` when free (advisory). */
  ttl(key: string): Promise<number | undefined>;
  /** How many owners wait for `key` (advisory). */
  queueLength(key: string): Promise<number>;
  /** The holders of `key` and its queued waiters (`since`: the object's clock), `undefined` when none. */
  inspect(key: string): Promise<LockInspection | undefined>;
  /** Always throws `TypeError`: a Durable Object namespace cannot list its objects. */
  list(options?: unknown): never;
}
