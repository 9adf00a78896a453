// Type declarations for `leasehold/postgres`. Written by hand; they import nothing from
// `pg`: clients are described by the few members the store uses.
import type { AcquireAnswer, InspectableStore, ListOptions, LockInspection, PermitRequest } from './index';

/** What the store needs from any client: `pg`'s `query(text, values)` resolving to `{ rows }`. */
export interface PgLikeQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/** A client that can LISTEN: a connected `pg.Client` (or a client checked out of a pool). */
export interface PgLikeListenClient extends PgLikeQueryable {
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  removeListener(event: string, listener: (...args: any[]) => void): unknown;
}

/**
 * A `pg.Pool`. For LISTEN the store opens a connection of its own with the pool's
 * `Client` class and `options`, outside the pool's `max`.
 */
export interface PgLikePool extends PgLikeQueryable {
  readonly Client: new (options: any) => PgLikeListenClient & { connect(): Promise<unknown>; end(): Promise<void> };
  readonly options: object;
  readonly totalCount: number;
  readonly idleCount: number;
}

export interface PostgresLockStoreOptions {
  /**
   * A `pg.Pool` (recommended), a connected `pg.Client`, or anything with `pg`'s
   * `query(text, values)`. The store never closes it.
   */
  client: PgLikePool | PgLikeQueryable;
  /**
   * The lock table (created by `ensureSchema()`). Any name: it is quoted.
   * @default 'leasehold_locks'
   */
  table?: string;
  /** The table's schema (must exist). Default: the connection's `search_path`. */
  schema?: string;
  /**
   * Announce releases with NOTIFY (in the release statement) and LISTEN in `subscribe`,
   * so waiters are woken at once instead of at their next poll.
   * @default true
   */
  notify?: boolean;
  /**
   * A dedicated, connected `pg.Client` for LISTEN, used for nothing else. Needed for
   * wake-on-release when `client` is a single `Client`; with a `Pool` the store opens
   * a connection of its own instead (see `subscribe`). The store never closes it.
   */
  listenClient?: PgLikeListenClient;
  /**
   * The turn of a process on a key, in milliseconds: how long one engine hands a lease
   * between its own executions, with no statement, before giving it back to the table.
   * @default 10
   */
  handOffAfter?: number;
  /**
   * `client` goes through a transaction-mode pooler (PgBouncer `pool_mode = transaction`):
   * the store never LISTENs on a connection built from its settings. Wake-ups then come
   * from `listenClient` (connected to PostgreSQL directly); without one waiters poll, and
   * the store emits one process warning (`LeaseholdWarning`, code `LEASEHOLD_POLLING`).
   * @default false
   */
  transactionPooling?: boolean;
}

/**
 * A lock store on PostgreSQL.
 *
 * - One statement per `acquire`, `renew` and `release`; the release's NOTIFY is part of
 *   the release statement.
 * - Expiry is judged by the database clock (`clock_timestamp()`), never the client's.
 * - Fencing tokens only increase per key, across release, expiry and deleted rows:
 *   token = greatest(last token + 1, database time in µs), issued under the key's row lock.
 * - One row per key locked: `key_digest bytea PRIMARY KEY, key text, owner text,
 *   expires_at timestamptz, token bigint, permits jsonb`, where `key_digest` is sha256 of the key's
 *   UTF-8 bytes (so keys of any length fit the index; PostgreSQL 11 or later). A release
 *   keeps the row (owner NULL) so the token sequence goes on; `prune(idleMs)` deletes
 *   rows of keys free for a while.
 * - Database and client errors reject unchanged; `false` from `renew`/`release` always
 *   means the live lease is not this owner's.
 * - Each statement is meant to be a transaction of its own: give the store a Pool, or a
 *   Client that is not inside a transaction of yours. Under REPEATABLE READ or
 *   SERIALIZABLE (`default_transaction_isolation`), a statement that fails to serialize
 *   (40001) is run again up to 3 times; an `acquire` that still fails answers
 *   `undefined` (the key is contended), `renew` and `release` reject with the error.
 * - Invalid arguments: `TypeError` (wrong type, empty string, U+0000, a lone surrogate) or `RangeError`
 *   (`ttlMs` not a positive safe integer, an identifier over 63 bytes), naming the argument.
 */
export declare class PostgresLockStore implements InspectableStore {
  /** @throws {TypeError | RangeError} when `client`, `table`, `schema`, `notify`, `listenClient`, `handOffAfter` or `transactionPooling` is invalid. */
  constructor(options: PostgresLockStoreOptions);

  readonly table: string;
  readonly schema: string | undefined;
  readonly notify: boolean;
  /** Whether `subscribe` can listen: `notify` is on and there is a `listenClient` or a Pool. */
  readonly canSubscribe: boolean;

  /**
   * Creates the table if it does not exist, and adds the `permits` column to a table made
   * before permits (rejects naming the statement to run when it cannot). Idempotent, safe
   * from many processes at once.
   * Rejects when the table exists in an earlier version's shape (no `key_digest`).
   */
  ensureSchema(): Promise<void>;

  /**
   * Takes the lease if no live lease exists, or with `{ limit, weight }` `weight` of the
   * key's `limit` permits; `undefined` when it is held (by anyone: locks are not
   * reentrant), waited for ahead of this owner, or still contended after the retries of a
   * serialization failure; `{ limit }` when the key is held or waited for with another
   * limit (a plain lease is a limit of 1).
   */
  acquire(key: string, owner: string, ttlMs: number, options?: PermitRequest): Promise<AcquireAnswer | undefined>;

  /**
   * Keeps permits: `limit`, `weight` and `mode`. A key held with permits keeps its holders
   * and its waiters' places in its row (`ensureSchema()` adds the `permits` column to a
   * table made before them); a waiter's place reserves its weight against later arrivals
   * from its second try on, and lapses 3 s after its last try.
   */
  readonly permits: true;

  /**
   * Resets the lease to `ttlMs` from now (database time); `false` when the live lease is
   * not `owner`'s. `{ fencingToken }`: the key's next grant is larger than it.
   */
  renew(key: string, owner: string, ttlMs: number, options?: { fencingToken: number }): Promise<boolean>;

  /**
   * Ends `owner`'s live lease (or permit) and announces it; `false` when it had lapsed or
   * is someone else's. `{ fencingToken }`: as for `renew`.
   */
  release(key: string, owner: string, options?: { fencingToken: number }): Promise<boolean>;

  /** `handOffAfter`: one engine hands a lease between its executions for at most this long. */
  readonly localHandoff: number;

  /** Whether a live lease exists (advisory). */
  isLocked(key: string): Promise<boolean>;

  /** Milliseconds left on the live lease (database time), `undefined` when free (advisory). */
  ttl(key: string): Promise<number | undefined>;

  /**
   * The holder of `key` (no waiters: the table keeps no queue for plain leases); on a key
   * held with permits, each holder with its `weight` (and `mode`), the waiters whose place
   * the row keeps, and the key's `limit`.
   */
  inspect(key: string): Promise<LockInspection | undefined>;

  /**
   * The keys held, 500 per statement, through the index `ensureSchema()` creates, in
   * byte order of their first 200 characters.
   */
  list(options?: ListOptions): AsyncIterable<string>;

  /**
   * Deletes the rows of keys free for at least `idleMs` (default 1 h); resolves to the
   * number deleted. Their tokens keep increasing if they are locked again.
   */
  prune(idleMs?: number): Promise<number>;

  /**
   * Calls `onReleased` whenever a lease on `key` is released (not when it expires).
   * Best effort: active about one round trip after the call; notifications can be lost,
   * so keep polling. A no-op when the store cannot listen (see `canSubscribe`).
   *
   * On a `Pool` the store listens on a connection of its own, opened with the pool's
   * settings on the first `subscribe` and closed about a second after the last listener
   * is removed: one connection beyond the pool's `max` while anyone waits, so that
   * waiters never take the pool's connections from the queries they wait on.
   * @returns a function that removes this listener (idempotent).
   */
  subscribe(key: string, onReleased: () => void): () => void;

  /**
   * Stops listening: closes the store's own listen connection (or detaches from the
   * `listenClient`). For an orderly shutdown, before `pool.end()`: without it, the
   * store's own connection closes as the pool ends. Does not wait for a listen
   * connection still being opened: that one is closed when it arrives.
   */
  close(): Promise<void>;
}
