'use strict';
/**
 * A PostgresLockStore's LISTEN connection (see "Wake-on-release" at the top of
 * index.cjs): the caller's `listenClient`, or a connection of the store's own built
 * from the Pool's settings, opened on the first `subscribe` and closed once nobody has
 * waited for LINGER_MS. The LISTENs follow the listeners through the shared reconciler
 * (lib/stores/shared/reconciler.cjs); a channel is UNLISTENed as its last listener
 * leaves (the connection is what lingers). A connection that fails is forgotten, and
 * the store's own is opened again MIN_RECONNECT_MS later while anyone waits.
 */
const { createHash } = require('node:crypto');
const { ReleaseListeners } = require('../shared/release-listeners.cjs');
const { ChannelReconciler } = require('../shared/reconciler.cjs');
const { noop, watchPoolEnd } = require('./client.cjs');
const { quoteIdentifier } = require('./statements.cjs');

const MIN_RECONNECT_MS = 1000;
// How long the store's own listen connection stays open without a listener: a key that
// is waited for again and again (a waiter leaves as it is granted, the next arrives)
// keeps its connection instead of paying a connect each time.
const LINGER_MS = 1000;

/** The NOTIFY channel of `key` for the table `qualified` (quoted, schema-qualified). */
function channelOf(qualified, key) {
  const digest = createHash('md5').update(`${qualified}\u0000${key}`, 'utf8').digest('hex');
  return `leasehold_${digest}`;
}

class PostgresListener {
  #listenClient;
  #onListenClientLost;
  #pool;
  listeners = new ReleaseListeners((channel) => this.#reconciler.changed(channel));
  #reconciler;
  #closed = false;
  #retryTimer = undefined;
  // Stops watching the Pool for its end, while the store's own connection is open.
  #unwatchPool = noop;

  /**
   * @param {{ listenClient?: object, pool?: object, onListenClientLost?: () => void }} source
   *   where the connection comes from, and who is told when a caller's listenClient fails
   */
  constructor({ listenClient, pool, onListenClientLost }) {
    this.#listenClient = listenClient;
    this.#onListenClientLost = onListenClientLost;
    this.#pool = pool;
    this.#reconciler = new ChannelReconciler({
      listeners: this.listeners,
      connectionLingerMs: LINGER_MS,
      driver: {
        open: () => this.#open(),
        openFailed: () => this.#retryLater(),
        opened: (connection) => {
          if (this.#closed || this.#pool?.ending === true) return false;
          if (connection.ours) this.#unwatchPool = watchPoolEnd(this.#pool, () => this.#poolEnded());
          return true;
        },
        discard: (connection) => {
          this.#stopWatchingPool();
          return connection.close([]);
        },
        closesWhenIdle: (connection) => connection.ours,
        apply: (connection, wanted, gone) =>
          connection.client.query(
            [...wanted.map((c) => `LISTEN ${quoteIdentifier(c)}`), ...gone.map((c) => `UNLISTEN ${quoteIdentifier(c)}`)].join('; '),
          ),
      },
    });
  }

  /** Whether there is a connection to listen on: a `listenClient` or a Pool. */
  get available() {
    return this.#listenClient !== undefined || this.#pool !== undefined;
  }

  /**
   * Stops listening: closes the store's own connection, UNLISTENs and detaches from a
   * `listenClient` (left open: it is the caller's), and drops every listener. A
   * connection still being opened is not waited for: it is closed when it arrives. A
   * pass on an open connection is: our UNLISTENs must follow its LISTENs.
   */
  async close() {
    this.#closed = true;
    this.listeners.clear();
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    await this.#reconciler.settled();
    const connection = this.#reconciler.connection;
    const channels = this.#reconciler.subscribed();
    this.#reconciler.stop();
    this.#stopWatchingPool();
    if (connection !== null) await connection.close(channels);
  }

  /**
   * Opens the listen connection: the `listenClient`, or a connection of the store's own
   * built from the pool's settings (outside its `max`, see the top of index.cjs).
   */
  async #open() {
    let client;
    let ours = false;
    if (this.#listenClient !== undefined) {
      client = this.#listenClient;
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
        if (message != null && typeof message.channel === 'string') this.listeners.notify(message.channel);
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

  #stopWatchingPool() {
    this.#unwatchPool();
    this.#unwatchPool = noop;
  }

  /** Forgets the connection (not closed here); reopened when wanted. */
  #forget() {
    this.#reconciler.forget();
    this.#stopWatchingPool();
  }

  /**
   * The Pool is being ended: the store's own connection closes with it, and the waiters
   * on this store try at once, failing with the pool's error (a LockStoreError) instead
   * of waiting for their next poll. No connection is opened on an ending pool.
   */
  #poolEnded() {
    const connection = this.#reconciler.connection;
    if (connection === null || !connection.ours) return;
    this.#forget();
    connection.close([]).catch(noop);
    for (const channel of this.listeners.channels()) this.listeners.notify(channel);
  }

  /** The connection failed: forget its LISTENs, reopen later if still wanted. */
  #lost(connection) {
    if (this.#reconciler.connection !== connection) return;
    this.#forget();
    connection.close([]).catch(noop);
    // A caller's listenClient cannot be reopened by the store; its own connection can.
    if (this.#pool !== undefined && !this.#closed && this.listeners.size > 0) this.#retryLater();
    else if (this.#pool === undefined && !this.#closed) this.#onListenClientLost?.();
  }

  #retryLater() {
    if (this.#retryTimer !== undefined || this.#closed) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#reconciler.sync();
    }, MIN_RECONNECT_MS);
    this.#retryTimer.unref?.();
  }
}

module.exports = { PostgresListener, channelOf };
