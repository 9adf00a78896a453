'use strict';
/**
 * `leasehold/postgres`: a `LockStore` on PostgreSQL, for the `pg` client (a `Pool`, a
 * `Client` or a pooled client) and anything that answers `query(text, values)` with
 * `{ rows }` the way `pg` does. Plain JavaScript, no dependency: the store works with
 * the client object it is given.
 *
 * What it promises
 * - One statement (one round trip) per `acquire`, `renew` and `release`, run again only
 *   after a serialization failure (see Transactions). The release announcement
 *   (`pg_notify`) is part of the release statement.
 * - Expiry is judged by the DATABASE clock (`clock_timestamp()`), never the client's:
 *   processes on machines with skewed clocks agree on who holds a lock.
 * - The fencing token is issued by the same statement that takes the lease, under the
 *   key's row lock, and only ever increases per key: across release, across expiry,
 *   and across the row being deleted (`prune`, TRUNCATE, a restore) as long as the
 *   database's wall clock does not step back (see ACQUIRE below).
 * - `renew` answering `false` and `release` answering `false` are definitive: the live
 *   lease is not this owner's. Every database or client error (connection refused,
 *   missing table, timeout, ...) rejects unchanged; nothing is turned into `false` or
 *   `undefined`, but for an acquire that keeps meeting serialization failures.
 * - `isLocked` and `ttl` are advisory: the answer may be stale when it arrives.
 *
 * Transactions. Each statement is meant to be a transaction of its own: give the store
 * a Pool, or a Client that runs no transaction of the caller's (a statement inside the
 * caller's BEGIN would take part in it, its lease rolled back with it). Under
 * `default_transaction_isolation` REPEATABLE READ or SERIALIZABLE, statements racing
 * on one key fail with a serialization failure (40001) where READ COMMITTED would wait
 * and go on. A failed statement changed nothing, so every method runs it again, up to
 * SERIALIZATION_RETRIES times, each time a new transaction with a new snapshot; an
 * `acquire` that still fails answers `undefined`, as for a held key (the key is
 * contended: the engine polls again), and the others reject with the error.
 *
 * The table. One row per key locked (and not pruned since):
 *   key_digest bytea PRIMARY KEY, key text, owner text, expires_at timestamptz, token bigint,
 *   permits jsonb (NULL but on a key held with permits; added by `ensureSchema()` to a
 *   table made before it)
 * `key_digest` is sha256 of the key's UTF-8 bytes, computed by the statements
 * (PostgreSQL 11 or later): a btree entry holds at most about 2.7 kB, so a primary key
 * on the key itself would refuse long keys that do not compress. Every statement finds
 * the row by its digest; `key` keeps the text for people reading the table.
 * A released lease keeps its row: `owner` becomes NULL and `expires_at` the release
 * time, and `token` stays, so the next acquire continues the key's sequence. The table
 * therefore grows with the number of distinct keys ever locked, about 150 bytes plus
 * the key per key. For a bounded set of keys (jobs,
 * accounts, resources) that is nothing; for unbounded keys (request ids, ...) call
 * `prune(idleMs)` from time to time: it deletes the rows of keys free for at least
 * `idleMs`, and tokens stay monotonic for those keys too.
 *
 * Permits (`limit`, `weight`; a `mode` reaches the store as permits of 2147483647). A
 * key held with permits keeps its holders in its row's `permits` column (jsonb), each
 * with its own expiry and token from the key's one counter; `renew` and `release` act on
 * the owner's permit, whichever kind it holds. The key has one limit while anyone holds
 * or waits: another limit (a plain acquire is a limit of 1) is answered `{ limit }`.
 * Releases are announced as for leases. Across processes the row keeps waiters' places
 * (permit-statements.cjs): a waiter refused twice reserves its weight against later
 * arrivals, so a heavy or exclusive waiter is not overtaken; a try that will not wait
 * (refused once) holds nobody up, and a place lapses 3 s after its owner's last try. It is
 * FIFO among waiters that keep trying (every release wakes them; a lapse is noticed at
 * their next poll, as for leases); a waiter's place is taken at its first try, so one
 * arriving between another's first and second try may pass it.
 *
 * Wake-on-release. Released leases are announced with NOTIFY on a channel per key,
 * `leasehold_<md5(schema.table NUL key)>` (42 characters: any key, of any length,
 * makes a valid channel name; stores wake each other when they name the table the
 * same way, `schema` included). `subscribe` LISTENs on a dedicated connection: the
 * `listenClient` option (kept until `close()`), or else, when `client` is a `pg.Pool`,
 * a connection of the store's own, opened with the pool's settings on the first
 * `subscribe` and closed once nobody has waited for LINGER_MS (and on `close()`). That
 * connection is not one of the pool's: a waiter holding one of the pool's `max`
 * connections for as long as it waits would starve the queries it waits on (on a Pool
 * of max 1, the holder's release and the waiter's own polls). So a store on a Pool uses
 * one connection beyond the pool's `max` while anyone waits. With a single `Client` and
 * no `listenClient`, `subscribe` is a no-op and waiters poll (50 ms doubling to 1 s): a
 * connection that runs queries cannot also wait for notifications between them
 * without delaying them. With `transactionPooling` (the client goes through PgBouncer
 * in transaction mode, where a LISTEN ends with its transaction) only a `listenClient`
 * is listened on; without one waiters poll and the store warns once (docs/failover.md).
 */

const { describe, checkOptionNames } = require('../../common/describe.cjs');
const { checkTtl, checkListener, carriedToken, checkHandOff, checkOptionsObject } = require('../shared/checks.cjs');
const { noop, checkText, checkIdentifier, isQueryable, isPool, toToken, isSerializationFailure, rowsOf } = require('./client.cjs');
const { statements, quoteIdentifier } = require('./statements.cjs');
const { PostgresListener, channelOf } = require('./listen.cjs');
const { warnPollingOnce } = require('./polling-warning.cjs');
const { postgresInspector, listIndex } = require('./inspect.cjs');
const { checkListOptions } = require('../../common/list-options.cjs');
const { acquireOptions } = require('../shared/permits.cjs');

// A serialization failure means another session's statement on the key committed
// meanwhile; run again, the statement sees it. More than one in a row takes a key
// changed as fast as statements run.
const SERIALIZATION_RETRIES = 3;

/**
 * A process's turn on a key: how long one engine hands a lease between its own
 * executions before giving it back to the table, where other processes wait.
 */
const DEFAULT_HAND_OFF_MS = 10;

// ---------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------

class PostgresLockStore {
  #client;
  #notify;
  #table;
  #schema;
  #qualified; // the quoted, schema-qualified table name used in SQL
  #sql;
  #handOffAfter;

  // Release announcements: the LISTEN connection (listen.cjs), when there is one.
  #listener;
  #transactionPooling;
  #closed = false;
  #inspector;

  /**
   * @param {{ client: object, table?: string, schema?: string, notify?: boolean, listenClient?: object, transactionPooling?: boolean }} options
   */
  constructor(options) {
    checkOptionsObject(options, 'a client');
    checkOptionNames(options, ['client', 'table', 'schema', 'notify', 'listenClient', 'handOffAfter', 'transactionPooling'], 'PostgresLockStore');
    const { client, table = 'leasehold_locks', schema, notify = true, listenClient, handOffAfter = DEFAULT_HAND_OFF_MS, transactionPooling = false } = options;
    if (typeof transactionPooling !== 'boolean') {
      throw new TypeError(`transactionPooling must be a boolean (true: client goes through a transaction-mode pooler such as PgBouncer), got ${describe(transactionPooling)}`);
    }
    this.#transactionPooling = transactionPooling;
    this.#handOffAfter = checkHandOff(handOffAfter);
    if (!isQueryable(client)) {
      throw new TypeError(
        `client must be a pg Pool or Client (an object with query(text, values)), got ${describe(client)}`,
      );
    }
    checkIdentifier('table', table);
    if (schema !== undefined) checkIdentifier('schema', schema);
    if (typeof notify !== 'boolean') throw new TypeError(`notify must be a boolean, got ${describe(notify)}`);
    if (listenClient !== undefined && !(isQueryable(listenClient) && typeof listenClient.on === 'function')) {
      throw new TypeError(
        `listenClient must be a connected pg Client (query() and on('notification')), got ${describe(listenClient)}`,
      );
    }
    this.#client = client;
    // Through a transaction-mode pooler a LISTEN ends with its transaction: the store
    // never listens on a connection built from the pool's settings then.
    this.#listener = new PostgresListener({
      listenClient,
      pool: listenClient === undefined && isPool(client) && !transactionPooling ? client : undefined,
      onListenClientLost: transactionPooling ? () => warnPollingOnce(this, 'its listenClient was lost') : undefined,
    });
    this.#notify = notify;
    this.#table = table;
    this.#schema = schema;
    this.#qualified = schema === undefined ? quoteIdentifier(table) : `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
    this.#sql = statements(this.#qualified, notify);
    this.#inspector = postgresInspector({ table: this.#qualified, query: (text, values, method) => this.#statement(text, values, method) });
  }

  /** The table name (unquoted). */
  get table() {
    return this.#table;
  }

  /** The schema name, or `undefined` (the connection's search_path decides). */
  get schema() {
    return this.#schema;
  }

  /** Whether releases are announced with NOTIFY and `subscribe` listens. */
  get notify() {
    return this.#notify;
  }

  /**
   * Creates the table if it does not exist (the schema itself must exist), and adds the
   * `permits` column to a table made before permits. Safe to call from many processes at
   * once, and on every start. Rejects when the table exists in
   * the shape of an earlier version of this store (a primary key on `key`, no
   * `key_digest`): drop it, or name another table.
   */
  async ensureSchema() {
    try {
      await this.#client.query(this.#sql.create);
    } catch (err) {
      // Two sessions creating the same table at once: the loser fails on the catalog's
      // unique index (23505), or finds the table (42P07) or its row type (42710). The
      // table exists now.
      if (err == null || !['23505', '42P07', '42710'].includes(err.code)) throw err;
      await this.#client.query(this.#sql.create);
    }
    try {
      await this.#client.query(this.#sql.checkShape);
    } catch (err) {
      if (err == null || err.code !== '42703') throw err;
      throw new Error(
        `PostgresLockStore: the table ${this.#qualified} has no key_digest column: it was made by an earlier ` +
          'version of this store, whose statements do not fit it. Drop it (no lease survives that), or pass another table name.',
        { cause: err },
      );
    }
    // A table made before permits gains their column; looked for first, so that a start
    // takes no exclusive lock on a table in use.
    await this.#client.query(this.#sql.checkPermits).catch(async (err) => {
      if (err == null || err.code !== '42703') throw err;
      try {
        await this.#client.query(this.#sql.addPermits);
      } catch (alterErr) {
        throw new Error(
          `PostgresLockStore: the table ${this.#qualified} has no permits column and it could not be added ` +
            `(${alterErr?.message}): run ALTER TABLE ${this.#qualified} ADD COLUMN permits jsonb as its owner.`,
          { cause: alterErr },
        );
      }
    });
    // The index `list` walks (inspect.cjs); racing creators meet as for the table.
    const index = listIndex(this.#qualified, `${this.#table.slice(0, 40)}_key_start`);
    await this.#client.query(index).catch((err) => {
      if (err == null || !['23505', '42P07', '42710'].includes(err.code)) throw err;
      return this.#client.query(index);
    });
  }

  /**
   * Takes the lease on `key` for `ttlMs` if no live lease exists, or with `{ limit,
   * weight }` `weight` of the key's `limit` permits (permit-statements.cjs). Resolves to
   * `{ fencingToken }`; `undefined` when the key is held (by anyone, this owner included:
   * locks are not reentrant), waited for ahead of this owner, or keeps failing to
   * serialize with other sessions' statements on it; `{ limit }` when the key is held
   * (or waited for) with another limit than the lock's (a plain lease is a limit of 1).
   * Rejects with the client's error when the database fails.
   */
  async acquire(key, owner, ttlMs, options) {
    checkText('key', key);
    checkText('owner', owner);
    checkTtl(ttlMs);
    const { limit, weight } = acquireOptions(options);
    const permits = limit !== undefined && limit > 1;
    let rows;
    try {
      rows = permits
        ? await this.#statement(this.#sql.permitAcquire, [key, owner, ttlMs, limit, weight], 'acquire')
        : await this.#statement(this.#sql.acquire, [key, owner, ttlMs], 'acquire');
    } catch (err) {
      if (isSerializationFailure(err)) return undefined; // contended: nothing was taken
      throw err;
    }
    if (rows.length === 0) return undefined;
    // A plain acquire that took a key may see it held with permits in its snapshot too.
    const row = rows.find((r) => r.token != null) ?? rows[0];
    if (row.token != null) return { fencingToken: toToken(row.token) };
    const held = Number(row.lim);
    return held !== (permits ? limit : 1) ? { limit: held } : undefined;
  }

  /** Keeps permits: `limit`, `weight` and `mode` (README, "Limits and shared reads"). */
  get permits() {
    return true;
  }

  /**
   * Resets the lease to `ttlMs` from now (database time) if it is `owner`'s live lease;
   * `false` when it is not. `{ fencingToken }`: the key's next grant will be larger (see
   * `localHandoff`).
   */
  async renew(key, owner, ttlMs, options) {
    checkText('key', key);
    checkText('owner', owner);
    checkTtl(ttlMs);
    const carried = carriedToken(options) ?? '0';
    return (await this.#statement(this.#sql.renew, [key, owner, ttlMs, carried], 'renew')).length > 0;
  }

  /**
   * This store hands leases over between one engine's executions (README, "What happens
   * when"): a process keeps a key for at most this turn, `handOffAfter` ms, before the
   * lease goes back to the table. A renew or release that carries `{ fencingToken }`
   * makes the key's next grant larger than it, and grants are never below the database
   * clock in microseconds (ACQUIRE below).
   */
  get localHandoff() {
    return this.#handOffAfter;
  }

  /**
   * Ends the lease if it is `owner`'s live lease, and announces the release (NOTIFY) in
   * the same statement. `false` when the lease had lapsed or belongs to someone else
   * (it is then left alone). The row and its token stay (see the table above).
   */
  async release(key, owner, options) {
    checkText('key', key);
    checkText('owner', owner);
    const carried = carriedToken(options) ?? '0';
    const values = this.#notify ? [key, owner, carried, this.#channel(key)] : [key, owner, carried];
    return (await this.#statement(this.#sql.release, values, 'release')).length > 0;
  }

  /** Runs `statement`, again after a serialization failure (see Transactions at the top). */
  async #statement(statement, values, method) {
    for (let retries = 0; ; retries += 1) {
      try {
        return rowsOf(await this.#client.query(statement, values), method);
      } catch (err) {
        if (!isSerializationFailure(err) || retries === SERIALIZATION_RETRIES) throw err;
      }
    }
  }

  /**
   * The holder of `key`, undefined when free; no waiters for plain leases (the table
   * keeps no queue for them); the holders, waiters and `limit` of a key held with
   * permits (inspect.cjs).
   */
  async inspect(key) {
    checkText('key', key);
    return this.#inspector.inspect(key);
  }

  /** The keys held, a page of an index at a time: at most `limit`, starting with `prefix`. */
  list(options) {
    const checked = checkListOptions(options);
    if (checked.prefix !== '') checkText('prefix', checked.prefix);
    return this.#inspector.list(checked);
  }

  /** Whether a live lease exists on `key` (advisory). */
  async isLocked(key) {
    checkText('key', key);
    return (await this.#statement(this.#sql.isLocked, [key], 'isLocked')).length > 0;
  }

  /** Milliseconds left on the live lease on `key` (database time), `undefined` when free (advisory). */
  async ttl(key) {
    checkText('key', key);
    const rows = await this.#statement(this.#sql.ttl, [key], 'ttl');
    if (rows.length === 0) return undefined;
    return Math.max(1, Number(rows[0].ms));
  }

  /**
   * Deletes the rows of keys that have been free (released or expired) for at least
   * `idleMs` (default one hour), and resolves to how many it deleted. Tokens of a
   * pruned key keep increasing when it is locked again: a new row starts at the
   * database time in microseconds, past every token the old row issued, unless the
   * database clock stepped back by more than `idleMs` meanwhile.
   */
  async prune(idleMs = 3_600_000) {
    if (typeof idleMs !== 'number') throw new TypeError(`idleMs must be a number of milliseconds, got ${describe(idleMs)}`);
    if (!Number.isSafeInteger(idleMs) || idleMs < 0) {
      throw new RangeError(`idleMs must be a non-negative integer number of milliseconds, got ${describe(idleMs)}`);
    }
    const rows = await this.#statement(this.#sql.prune, [idleMs], 'prune');
    return Number(rows[0]?.pruned ?? 0);
  }

  #channel(key) {
    return channelOf(this.#qualified, key);
  }

  /**
   * Calls `onReleased` when a lease on `key` is released through any PostgresLockStore
   * on the same table of the same database. Returns a function that removes the
   * listener (idempotent).
   *
   * Best effort: the LISTEN takes effect a round trip after this returns, and a
   * notification can be lost (a dropped connection); callers keep polling and treat the
   * call as a hint to retry early. Expiry is not announced. Channels are reference
   * counted: one LISTEN per key however many waiters. Never throws for database
   * reasons and never lets a connection error crash the process; a listener that
   * throws is ignored. Throws TypeError for bad arguments. A no-op (returning a no-op)
   * when `notify` is false, when there is no connection to listen on (a single Client
   * without `listenClient`), and after `close()`.
   */
  subscribe(key, onReleased) {
    checkText('key', key);
    checkListener(onReleased);
    if (this.#closed || !this.canSubscribe) {
      if (!this.#closed && this.#notify && this.#transactionPooling) warnPollingOnce(this, 'it has no listenClient');
      return noop;
    }
    return this.#listener.listeners.add(this.#channel(key), onReleased);
  }

  /** Whether `subscribe` can listen: `notify` is on and there is a `listenClient` or a Pool. */
  get canSubscribe() {
    return this.#notify && this.#listener.available;
  }

  /**
   * Stops listening: closes the store's own listen connection, UNLISTENs and detaches
   * from a `listenClient` (left open: it is the caller's), and drops every listener.
   * Call it before `pool.end()`. A listen connection still being opened is not waited
   * for: it is closed when it arrives. The store still acquires, renews and releases
   * afterwards; `subscribe` becomes a no-op.
   */
  async close() {
    this.#closed = true;
    await this.#listener.close();
  }
}

module.exports = { PostgresLockStore };
