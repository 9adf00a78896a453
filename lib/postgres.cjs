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
 *   key_digest bytea PRIMARY KEY, key text, owner text, expires_at timestamptz, token bigint
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

const { createHash } = require('node:crypto');
const { ReleaseListeners } = require('./release-listeners.cjs');
const { checkWellFormed } = require('./well-formed.cjs');
const { describe, checkOptionNames, carriedToken } = require('./describe.cjs');
const { warnPollingOnce } = require('./polling-warning.cjs');

// ---------------------------------------------------------------------------------
// Names and argument checks
// ---------------------------------------------------------------------------------

function noop() {}

/**
 * Keys and owners: non-empty strings that PostgreSQL `text` can hold (no U+0000), and
 * well-formed UTF-16 (`pg` sends a lone surrogate as U+FFFD: distinct keys would share
 * a row).
 */
function checkText(name, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
  if (value.includes('\u0000')) {
    throw new TypeError(`${name} must not contain the character U+0000 (PostgreSQL text cannot store it)`);
  }
  checkWellFormed(value, name);
}

function checkTtl(value) {
  if (typeof value !== 'number') {
    throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`ttlMs must be a positive integer number of milliseconds, got ${describe(value)}`);
  }
}

/** A table or schema name: used as a quoted identifier, so any text that fits one. */
function checkIdentifier(name, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
  if (value.includes('\u0000')) throw new TypeError(`${name} must not contain the character U+0000`);
  // Two names that differ only in a lone surrogate would name one table.
  checkWellFormed(value, name);
  if (Buffer.byteLength(value, 'utf8') > 63) {
    throw new RangeError(`${name} must be at most 63 bytes long (a PostgreSQL identifier), got ${describe(value)}`);
  }
}

/** `"name"`, with inner quotes doubled: safe for any text. */
function quoteIdentifier(name) {
  return `"${name.replace(/"/g, '""')}"`;
}

function isQueryable(value) {
  return value != null && (typeof value === 'object' || typeof value === 'function') && typeof value.query === 'function';
}

/**
 * A `pg.Pool` (or a pool built on pg-pool): it exposes the client class it builds its
 * connections with (`Client`) and the settings it builds them from (`options`).
 */
function isPool(client) {
  return (
    'totalCount' in client &&
    'idleCount' in client &&
    typeof client.Client === 'function' &&
    client.options != null &&
    typeof client.options === 'object'
  );
}

/**
 * The stores watching each Pool for its end: one 'remove' listener per pool, however
 * many stores share it. pg-pool has no 'end' event; `end()` sets `ending` and removes
 * its idle clients (and each busy one as it comes back), emitting 'remove' for each.
 */
const poolEndWatchers = new WeakMap();

/** Calls `onEnd` when `pool` is being ended; returns a function that stops it. */
function watchPoolEnd(pool, onEnd) {
  if (typeof pool.on !== 'function') return noop;
  let watchers = poolEndWatchers.get(pool);
  if (watchers === undefined) {
    watchers = new Set();
    poolEndWatchers.set(pool, watchers);
    pool.on('remove', () => {
      if (pool.ending !== true) return;
      for (const watcher of [...watchers]) watcher();
    });
  }
  const watcher = () => onEnd();
  watchers.add(watcher);
  return () => watchers.delete(watcher);
}

function toToken(reply) {
  const n = typeof reply === 'number' ? reply : Number(reply);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new Error(`PostgresLockStore: unexpected token from the acquire statement: ${describe(reply)}`);
  }
  return n;
}

function isSerializationFailure(err) {
  return err != null && err.code === '40001';
}

function rowsOf(result, method) {
  const rows = result == null ? undefined : result.rows;
  if (!Array.isArray(rows)) {
    throw new Error(`PostgresLockStore: the client's query() did not resolve to { rows: [...] } for ${method}`);
  }
  return rows;
}

const MIN_RECONNECT_MS = 1000;
// A serialization failure means another session's statement on the key committed
// meanwhile; run again, the statement sees it. More than one in a row takes a key
// changed as fast as statements run.
const SERIALIZATION_RETRIES = 3;
// How long the store's own listen connection stays open without a listener: a key that
// is waited for again and again (a waiter leaves as it is granted, the next arrives)
// keeps its connection instead of paying a connect each time.
const LINGER_MS = 1000;

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
  #listenClientOption;
  #pool;
  #notify;
  #table;
  #schema;
  #qualified; // the quoted, schema-qualified table name used in SQL
  #sql;
  #handOffAfter;
  #transactionPooling;

  // Release announcements: listeners per channel.
  #listeners = new ReleaseListeners(() => this.#sync());
  #connection = null; // the listen connection, once open
  #listening = new Set();
  #syncing = null; // the running sync pass, if any
  #opening = false; // whether that pass is waiting for a connection to open
  #dirty = false;
  #closed = false;
  #retryTimer = undefined;
  // Since when (performance.now()) the store's own listen connection has had no
  // listener, and the timer that closes it once it has lingered.
  #idleSince = undefined;
  #lingerTimer = undefined;
  // Stops watching the Pool for its end, while the store's own connection is open.
  #unwatchPool = noop;

  /**
   * @param {{ client: object, table?: string, schema?: string, notify?: boolean, listenClient?: object }} options
   */
  constructor(options) {
    if (options == null || typeof options !== 'object') {
      throw new TypeError(`options must be an object with a client, got ${describe(options)}`);
    }
    checkOptionNames(options, ['client', 'table', 'schema', 'notify', 'listenClient', 'handOffAfter', 'transactionPooling'], 'PostgresLockStore');
    const { client, table = 'leasehold_locks', schema, notify = true, listenClient, handOffAfter = DEFAULT_HAND_OFF_MS, transactionPooling = false } = options;
    if (typeof transactionPooling !== 'boolean') {
      throw new TypeError(`transactionPooling must be a boolean (true: client goes through a transaction-mode pooler such as PgBouncer), got ${describe(transactionPooling)}`);
    }
    this.#transactionPooling = transactionPooling;
    if (typeof handOffAfter !== 'number' || !Number.isSafeInteger(handOffAfter) || handOffAfter < 0) {
      throw new RangeError(`handOffAfter must be a non-negative integer number of milliseconds, got ${describe(handOffAfter)}`);
    }
    this.#handOffAfter = handOffAfter;
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
    this.#listenClientOption = listenClient;
    // Through a transaction-mode pooler a LISTEN ends with its transaction: the store
    // never listens on a connection built from the pool's settings then.
    this.#pool = listenClient === undefined && isPool(client) && !transactionPooling ? client : undefined;
    this.#notify = notify;
    this.#table = table;
    this.#schema = schema;
    this.#qualified = schema === undefined ? quoteIdentifier(table) : `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
    this.#sql = statements(this.#qualified, notify);
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
   * Creates the table if it does not exist (the schema itself must exist). Safe to call
   * from many processes at once, and on every start. Rejects when the table exists in
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
  }

  /**
   * Takes the lease on `key` for `ttlMs` if no live lease exists. Resolves to the new
   * fencing token, or `undefined` when the key is held (by anyone, this owner included:
   * locks are not reentrant) or keeps failing to serialize with other sessions'
   * statements on it. Rejects with the client's error when the database fails.
   */
  async acquire(key, owner, ttlMs) {
    checkText('key', key);
    checkText('owner', owner);
    checkTtl(ttlMs);
    let rows;
    try {
      rows = await this.#statement(this.#sql.acquire, [key, owner, ttlMs], 'acquire');
    } catch (err) {
      if (isSerializationFailure(err)) return undefined; // contended: nothing was taken
      throw err;
    }
    if (rows.length === 0) return undefined;
    return { fencingToken: toToken(rows[0].token) };
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

  /**
   * Said once per store: behind a transaction-mode pooler without a direct connection
   * to LISTEN on, waiters are not woken on release and poll (50 ms doubling to 1 s).
   */
  #warnPolling(why) {
    warnPollingOnce(
      this,
      'LEASEHOLD_POLLING',
      `PostgresLockStore (transactionPooling) cannot LISTEN because ${why}: waiters poll instead of being woken on release. ` +
        'Pass listenClient, a pg Client connected to PostgreSQL directly (not through the pooler).',
    );
  }

  #channel(key) {
    const digest = createHash('md5').update(`${this.#qualified}\u0000${key}`, 'utf8').digest('hex');
    return `leasehold_${digest}`;
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
    if (typeof onReleased !== 'function') {
      throw new TypeError(`onReleased must be a function, got ${describe(onReleased)}`);
    }
    if (this.#closed || !this.#notify) return noop;
    if (!this.canSubscribe) {
      if (this.#transactionPooling) this.#warnPolling('it has no listenClient');
      return noop;
    }
    return this.#listeners.add(this.#channel(key), onReleased);
  }

  /** Whether `subscribe` can listen: `notify` is on and there is a `listenClient` or a Pool. */
  get canSubscribe() {
    return this.#notify && (this.#listenClientOption !== undefined || this.#pool !== undefined);
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
    this.#listeners.clear();
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    if (this.#lingerTimer !== undefined) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    // A pass still opening a connection is not waited for: the server may be long in
    // answering, and the connection is closed as soon as it arrives (#syncLoop). A pass
    // on an open connection is: our UNLISTENs must follow its LISTENs.
    if (this.#syncing !== null && !this.#opening) await this.#syncing;
    const connection = this.#connection;
    const channels = [...this.#listening];
    this.#forgetConnection();
    if (connection !== null) await connection.close(channels);
  }

  /**
   * Opens the listen connection: the `listenClient`, or a connection of the store's own
   * built from the pool's settings (outside its `max`, see the top of this file).
   */
  async #open() {
    let client;
    let ours = false;
    if (this.#listenClientOption !== undefined) {
      client = this.#listenClientOption;
    } else {
      // The pool's own `options` object, not a copy: pg-pool keeps the password on it as
      // a non-enumerable property, which a copy would lose.
      if (this.#pool.ending === true) throw new Error('the pool is ending');
      client = new this.#pool.Client(this.#pool.options);
      ours = true;
      await client.connect();
    }
    const connection = {
      client,
      ours,
      dead: false,
      onNotification: (message) => {
        if (message != null && typeof message.channel === 'string') this.#listeners.notify(message.channel);
      },
      onGone: () => {
        if (connection.dead) return;
        connection.dead = true;
        this.#lost(connection);
      },
      detach() {
        client.removeListener?.('notification', connection.onNotification);
        client.removeListener?.('error', connection.onGone);
        client.removeListener?.('end', connection.onGone);
      },
      async close(channels) {
        if (!ours) {
          // The caller's connection stays open: leave it as it was given.
          if (!connection.dead && channels.length > 0) {
            await client.query(channels.map((c) => `UNLISTEN ${quoteIdentifier(c)}`).join('; ')).catch(noop);
          }
          connection.detach();
          return;
        }
        connection.detach();
        // Ours to the end: a late socket error must not find the client without a listener.
        client.on('error', noop);
        await client.end().catch(noop);
      },
    };
    client.on('notification', connection.onNotification);
    client.on('error', connection.onGone);
    client.on('end', connection.onGone);
    return connection;
  }

  /** Forgets the store's listen connection (not closed here); reopened when wanted. */
  #forgetConnection() {
    this.#connection = null;
    this.#listening.clear();
    this.#unwatchPool();
    this.#unwatchPool = noop;
  }

  /**
   * The Pool is being ended: the store's own connection closes with it, and the waiters
   * on this store try at once, failing with the pool's error (a LockStoreError) instead
   * of waiting for their next poll. No connection is opened on an ending pool.
   */
  #poolEnded() {
    const connection = this.#connection;
    if (connection === null || !connection.ours) return;
    this.#forgetConnection();
    connection.close([]).catch(noop);
    for (const channel of this.#listeners.channels()) this.#listeners.notify(channel);
  }

  /** The listen connection failed: forget its LISTENs, reopen later if still wanted. */
  #lost(connection) {
    if (this.#connection !== connection) return;
    this.#forgetConnection();
    connection.close([]).catch(noop);
    // A caller's listenClient cannot be reopened by the store; its own connection can.
    if (this.#pool !== undefined && !this.#closed && this.#listeners.size > 0) this.#retryLater();
    else if (this.#pool === undefined && this.#transactionPooling) this.#warnPolling('its listenClient was lost');
  }

  #retryLater() {
    if (this.#retryTimer !== undefined || this.#closed) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#sync();
    }, MIN_RECONNECT_MS);
    this.#retryTimer.unref?.();
  }

  /**
   * Whether the store's own listen connection has been without a listener for
   * LINGER_MS. While it has not, a (non-blocking) timer is set for another pass.
   */
  #lingered() {
    const now = performance.now();
    this.#idleSince ??= now;
    if (now - this.#idleSince >= LINGER_MS) return true;
    if (this.#lingerTimer === undefined) {
      this.#lingerTimer = setTimeout(() => {
        this.#lingerTimer = undefined;
        this.#sync();
      }, this.#idleSince + LINGER_MS - now);
      this.#lingerTimer.unref?.();
    }
    return false;
  }

  /**
   * Brings the LISTENs on the connection in line with #listeners, and closes the store's
   * own connection once it has lingered without a listener; one pass at a time.
   */
  #sync() {
    this.#dirty = true;
    if (this.#syncing !== null) return;
    // From the next microtask: a waiter that leaves as the next one arrives, in the same
    // turn (a handover), changes nothing then, instead of an UNLISTEN and a LISTEN with a
    // window between them where a release's NOTIFY would find nobody listening.
    this.#syncing = Promise.resolve()
      .then(() => this.#syncLoop())
      .catch(noop);
  }

  /**
   * The passes are over as the last one ends (#syncing is cleared there, not microtasks
   * later, when a change coming meanwhile would find a pass still running and be left
   * for the next one).
   */
  async #syncLoop() {
    try {
      while (this.#dirty && !this.#closed) {
        this.#dirty = false;
        if (this.#connection === null) {
          if (this.#listeners.size === 0) return;
          let connection;
          this.#opening = true;
          try {
            connection = await this.#open();
          } catch {
            this.#retryLater();
            return; // no connection: waiters poll
          } finally {
            this.#opening = false;
          }
          if (this.#closed || this.#pool?.ending === true) {
            await connection.close([]);
            return;
          }
          this.#connection = connection;
          if (connection.ours) this.#unwatchPool = watchPoolEnd(this.#pool, () => this.#poolEnded());
        }
        const connection = this.#connection;
        if (this.#listeners.size > 0) {
          this.#idleSince = undefined;
        } else if (connection.ours && this.#lingered()) {
          this.#forgetConnection();
          this.#idleSince = undefined;
          await connection.close([]);
          continue; // a subscribe meanwhile opens a new one
        }
        const wanted = this.#listeners.channels().filter((c) => !this.#listening.has(c));
        const unwanted = [...this.#listening].filter((c) => !this.#listeners.has(c));
        const commands = [
          ...wanted.map((c) => `LISTEN ${quoteIdentifier(c)}`),
          ...unwanted.map((c) => `UNLISTEN ${quoteIdentifier(c)}`),
        ];
        if (commands.length === 0) continue;
        try {
          await connection.client.query(commands.join('; '));
          if (connection === this.#connection) {
            for (const c of wanted) this.#listening.add(c);
            for (const c of unwanted) this.#listening.delete(c);
          }
        } catch {
          // The connection failed ('error'/'end' handle it) or the statement did: the
          // waiters keep polling; the next subscribe or unsubscribe tries again.
        }
      }
    } finally {
      this.#syncing = null;
    }
  }
}

/** The SQL of a store on `table` (already quoted and qualified). */
function statements(table, notify) {
  // The row's key: sha256 of the key's UTF-8 bytes (see the table at the top).
  const digest = `sha256(convert_to($1::text, 'UTF8'))`;

  /*
   * ACQUIRE. $1 key, $2 owner, $3 ttl ms.
   * Free means "no row, or a row whose expires_at has passed" by the database clock.
   * The row's lock (ON CONFLICT DO UPDATE locks the conflicting row and re-checks the
   * WHERE on its latest version) makes the check and the take atomic.
   * token = greatest(stored token + 1, database time in microseconds). The stored
   * token keeps the sequence strictly increasing per key, whatever the clock does; the
   * time keeps it increasing when the row is gone (pruned, truncated, restored from an
   * older backup). Microseconds stay below 2^53 until the year 2255: exact as a JS number.
   */
  const acquire = `WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO ${table} AS l (key_digest, key, owner, expires_at, token)
SELECT ${digest}, $1::text, $2::text, t + $3::float8 * interval '1 millisecond', floor(extract(epoch FROM t) * 1000000)::bigint FROM now
ON CONFLICT (key_digest) DO UPDATE
  SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, token = greatest(l.token + 1, EXCLUDED.token)
  WHERE l.expires_at <= clock_timestamp()
RETURNING l.token::text AS token`;

  /*
   * RENEW. $1 key, $2 owner, $3 ttl ms, $4 the holder's token (0 when none is carried).
   * Only the owner's live lease. The carried token raises the key's token: the next
   * grant (stored token + 1) is larger than every token the holder's process handed
   * over locally.
   */
  const renew = `UPDATE ${table}
SET expires_at = clock_timestamp() + $3::float8 * interval '1 millisecond', token = greatest(token, $4::bigint)
WHERE key_digest = ${digest} AND owner = $2::text AND expires_at > clock_timestamp()
RETURNING 1 AS renewed`;

  /*
   * RELEASE. $1 key, $2 owner, $3 the holder's token (as in RENEW), [$4 channel]. Only
   * the owner's live lease; the row and its token stay. The NOTIFY is sent at commit,
   * only when a lease was released.
   */
  const update = `UPDATE ${table}
  SET owner = NULL, expires_at = clock_timestamp(), token = greatest(token, $3::bigint)
  WHERE key_digest = ${digest} AND owner = $2::text AND expires_at > clock_timestamp()
  RETURNING 1`;
  const release = notify
    ? `WITH released AS (\n  ${update}\n)\nSELECT 1 AS released, pg_notify($4::text, '') FROM released`
    : `${update} AS released`;

  return {
    create: `CREATE TABLE IF NOT EXISTS ${table} (
  key_digest bytea PRIMARY KEY,
  key text NOT NULL,
  owner text,
  expires_at timestamptz NOT NULL,
  token bigint NOT NULL
)`,
    // Fails (42703) on a table of the earlier shape, keyed on `key` itself.
    checkShape: `SELECT key_digest FROM ${table} LIMIT 0`,
    acquire,
    renew,
    release,
    isLocked: `SELECT 1 AS locked FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()`,
    ttl: `SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms
FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()`,
    prune: `WITH pruned AS (
  DELETE FROM ${table} WHERE expires_at <= clock_timestamp() - $1::float8 * interval '1 millisecond' RETURNING 1
)
SELECT count(*)::float8 AS pruned FROM pruned`,
  };
}

module.exports = { PostgresLockStore };
