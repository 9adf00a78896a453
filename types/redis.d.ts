// Type declarations for `leasehold/redis`. Written by hand; they import nothing from
// ioredis or node-redis: clients are described by the few members the store uses.
import type { AcquireAnswer, InspectableStore, ListOptions, LockGrant, LockInspection, PermitRequest } from './index';

/** The part of an ioredis (v5) `Redis` or `Cluster` client that the store uses. */
export interface IORedisLikeClient {
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  pttl(key: string): Promise<number>;
  /** Used once, on the first `subscribe`, to open the store's subscriber connection. */
  duplicate?(): IORedisLikeSubscriber;
  /** ioredis prepends `keyPrefix` to keys, not to channels: the store adds it to the channels it subscribes. */
  readonly options?: { readonly keyPrefix?: string };
}

/** What the store needs from an ioredis duplicate to receive release announcements. */
export interface IORedisLikeSubscriber {
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  disconnect(): void;
  readonly status?: string;
}

/** The part of a node-redis (v4/v5) client or cluster (`createClient`, `createCluster`) that the store uses. */
export interface NodeRedisLikeClient {
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  pTTL(key: string): Promise<unknown>;
  /** Used once, on the first `subscribe`; the duplicate is connected by the store. */
  duplicate?(): NodeRedisLikeSubscriber;
}

/** The store's pub/sub listener, as node-redis calls it (strings, or Buffers in buffer mode). */
export type NodeRedisLikeListener = (message: string | Uint8Array, channel: string | Uint8Array) => unknown;

/** What the store needs from a node-redis duplicate to receive release announcements. */
export interface NodeRedisLikeSubscriber {
  connect(): Promise<unknown>;
  subscribe(channels: string[], listener: NodeRedisLikeListener): Promise<unknown>;
  unsubscribe(channels: string[], listener: NodeRedisLikeListener): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  /** node-redis v5 */
  destroy?(): void;
  /** node-redis v4 */
  disconnect?(): Promise<unknown>;
  readonly isOpen?: boolean;
}

export type RedisLikeClient = IORedisLikeClient | NodeRedisLikeClient;

export interface RedisLockStoreOptions {
  /**
   * A connected ioredis or node-redis client (standalone or cluster). The store never
   * closes it. node-redis clients must be connected (`await client.connect()`).
   */
  client: RedisLikeClient;
  /**
   * Prefix of every Redis name the store writes (after an ioredis client's `keyPrefix`).
   * Non-empty, without `{` or `}`.
   * @default 'lock'
   */
  prefix?: string;
  /**
   * The turn of a process on a contended key, in milliseconds: once the first queued
   * waiter has waited this long and the releasing process has had the key this long, a
   * release hands the lease straight to that waiter rather than freeing the key (which
   * lets the releasing process take it again at once). 0: every release hands over,
   * strictly in arrival order.
   * @default 10
   */
  handOffAfter?: number;
  /**
   * Replicas that must hold each grant, renewal and raised token floor (`WAIT`) before it
   * counts: an acquire they do not acknowledge within `replicaTimeout` is released again
   * and rejects (the engine reports a `LockStoreError` whose `cause.code` is
   * `'REPLICAS_NOT_ACKNOWLEDGED'`). Turns grants on release off. See docs/failover.md.
   * @default 0
   */
  minReplicas?: number;
  /**
   * How long each `WAIT` may take, in milliseconds (positive). Only with `minReplicas`.
   * @default 1000
   */
  replicaTimeout?: number;
}

/**
 * A lock store on Redis, standalone or Redis Cluster.
 *
 * - One round trip per `acquire`, `renew` and `release` (a Lua script run with EVALSHA,
 *   falling back to EVAL once when the server answers NOSCRIPT).
 * - Fencing tokens only increase per key, across release, expiry, and a Redis restart
 *   that lost its data: token = max(last token + 1, Redis server time in µs).
 * - A lock key `k` is stored as `${prefix}:{enc(k)}` (lease, value: owner),
 *   `${prefix}:{enc(k)}:token` (last token, expires max(10 × ttl, 60 s) after the last
 *   acquire) and announced on the channel `${prefix}:{enc(k)}:released`, where `enc`
 *   percent-encodes `%`, `{`, `}` and lone surrogates: one hash slot per key, no two
 *   keys sharing a name. An ioredis client's `keyPrefix` comes first in each of these
 *   names, the channel included: `prefix: 'p'` on a client with `keyPrefix: 'app:'`
 *   shares its locks with `prefix: 'app:p'` on a client without one.
 * - Grant on release: an `acquire` with `{ queue: true }` that finds the key held queues
 *   its owner (`${prefix}:{enc(k)}:queue` / `:waiters`, entries kept 3 s unless the owner
 *   asks again). `release` hands the lease to the first queued owner still waiting (new
 *   token, its own ttl) and tells its store on that store's channel
 *   `${prefix}:grants:<random>`; the store offers the grant to its `subscribe` listeners
 *   and releases it when none claims it (unless its answer to that owner's own try has
 *   already handed over the same lease, or that try is still unanswered: it then answers
 *   with the grant, or releases it if it fails). Without a live queued owner the lease is
 *   deleted and the release announced on `${prefix}:{enc(k)}:released`.
 * - Redis and client errors reject unchanged; `false` from `renew`/`release` always
 *   means the live lease is not this owner's.
 * - Invalid arguments: `TypeError` (wrong type, empty string) or `RangeError`
 *   (`ttlMs` not a positive safe integer), naming the argument.
 */
export declare class RedisLockStore implements InspectableStore {
  /**
   * @throws {TypeError} when `client` is not an ioredis/node-redis client, or `prefix` is invalid.
   * @throws {RangeError} when `handOffAfter` is not a non-negative integer number of milliseconds,
   *   `minReplicas` not a non-negative integer, or `replicaTimeout` not a positive integer.
   * @throws {TypeError} when `replicaTimeout` is given without `minReplicas`.
   */
  constructor(options: RedisLockStoreOptions);

  /** The key prefix in use. */
  readonly prefix: string;

  /**
   * Takes the lease on `key` for `ttlMs` if no live lease exists; `undefined` when it is
   * held (by anyone: locks are not reentrant). With options (as the engine passes them),
   * it answers with the lease when a release has already handed it to `owner`, counted
   * again from now; with `{ queue: true }` a held key also queues `owner` for a grant on
   * release (see above).
   * With `{ limit, weight }` (permits; a mode is permits of 2147483647) it takes `weight`
   * of the key's `limit` permits when they fit beside the live holders' and nobody is
   * queued ahead; each holder has its own lease and token. `{ limit }` (the key's) when
   * the key is held or waited for with another limit, a plain lease being limit 1.
   * @throws {TypeError | RangeError} for bad options, naming the field.
   */
  acquire(key: string, owner: string, ttlMs: number, options?: PermitRequest): Promise<AcquireAnswer | undefined>;

  /** Keeps permits: `limit`, `weight` and `mode`. */
  readonly permits: true;

  /** True while the store can deliver grants: not closed, and the client can `duplicate()`. */
  readonly grantsOnRelease: boolean;

  /**
   * Resets the lease (or `owner`'s permit) to `ttlMs` from now; `false` when the owner
   * holds no live lease or permit. `{ fencingToken }`: the key's next grant is larger than it.
   */
  renew(key: string, owner: string, ttlMs: number, options?: { fencingToken: number }): Promise<boolean>;

  /**
   * Deletes `owner`'s live lease (or gives its permit back, handing permits on to the
   * queued owners from the head while each fits) and announces it to subscribers;
   * `false` when the lease had lapsed or is someone else's (which is left alone).
   * `{ fencingToken }`: the key's next grant is larger than it.
   */
  release(key: string, owner: string, options?: { fencingToken: number }): Promise<boolean>;

  /** `handOffAfter`: one engine hands a lease between its executions for at most this long. */
  readonly localHandoff: number;

  /** Whether a live lease exists (advisory). */
  isLocked(key: string): Promise<boolean>;

  /** Milliseconds left on the live lease, `undefined` when free (advisory). */
  ttl(key: string): Promise<number | undefined>;

  /**
   * The holder (its token is the key's last) and the queued waiters whose entries are
   * valid, in queue order, `since` by the server's clock: one read-only script. On a key
   * held with permits: every live holder with its `weight` (and `mode`), oldest grant
   * first, and the key's `limit`.
   */
  inspect(key: string): Promise<LockInspection | undefined>;

  /**
   * The keys held, by SCAN (never KEYS) on the server or on each Cluster master, 1,000
   * names looked at per call. As SCAN promises, a key may come twice.
   */
  list(options?: ListOptions): AsyncIterable<string>;

  /**
   * Calls `onReleased()` whenever a lease on `key` is released to nobody (not when it
   * expires), and `onReleased(grant)` when a release handed it to an owner this store
   * queued; a listener claims a grant by returning true, and a grant no listener claims
   * is released, unless this store's answer to that owner's try has already handed the
   * same lease over, or a try of that owner on `key` is still unanswered (it answers
   * with the grant). Best effort: active about one round trip after the call; messages
   * can be lost, so keep polling. Never throws for Redis reasons; a no-op after `close()`.
   * @returns a function that removes this listener (idempotent).
   */
  subscribe(
    key: string,
    onReleased: (grant?: LockGrant) => boolean | void,
  ): () => void;

  /**
   * Closes the subscriber connection the store opened, if any; takes this store's
   * waiters out of the queues and wakes the first waiter of a key it released and had
   * kept for its own next try (sent, not awaited: close the store before the client).
   * The client stays open. For an orderly shutdown: without it, the subscriber
   * connection closes when the client does, and never keeps the process alive alone.
   */
  close(): Promise<void>;
}
