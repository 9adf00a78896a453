'use strict';
/**
 * A RedisLockStore's subscriber connection: one per store (`client.duplicate()`),
 * opened on the first `subscribe`, with the key channels its waiters listen on (release
 * announcements) and the store's own grant channel, subscribed from the first wait
 * until `close()`. The channels follow the listeners through the shared reconciler
 * (lib/stores/shared/reconciler.cjs), each lingering LINGER_MS after its last
 * listener left.
 *
 * The connection keeps the process alive only while someone waits through the store
 * (as the engine's timers do then): a process whose work is done exits without
 * `close()`. It goes with the caller's client: when that one ends (closed by its owner,
 * or given up reconnecting) the connection is dropped and the waiters are told at once,
 * so that they try, and fail with the client's error, instead of waiting for a poll.
 */
const { ReleaseListeners } = require('../shared/release-listeners.cjs');
const { ChannelReconciler } = require('../shared/reconciler.cjs');
const { noop } = require('./adapters.cjs');

/** How long a key's channel stays subscribed after its last listener left. */
const LINGER_MS = 1_000;

class RedisSubscriptions {
  #redis;
  #grantChannel;
  #onGrant;
  #onChannelIdle;
  #onDropped;
  listeners = new ReleaseListeners((channel) => this.#changedChannel(channel));
  #reconciler;
  #grantsWanted = false;
  #closed = false;
  // Stops watching the caller's client for its end, while the connection is open; and
  // whether that connection may keep the process alive.
  #unwatchClient = noop;
  #keepingAlive = false;

  /**
   * @param {object} redis  the client's adapter (adapters.cjs)
   * @param {string} grantChannel  the store's own channel for grants
   * @param {{ onGrant(message: string): void, onChannelIdle(channel: string): void, onDropped(): void }} hooks
   *   a grant message; a key channel that lost its last listener; the connection dropped
   */
  constructor(redis, grantChannel, { onGrant, onChannelIdle, onDropped }) {
    this.#redis = redis;
    this.#grantChannel = grantChannel;
    this.#onGrant = onGrant;
    this.#onChannelIdle = onChannelIdle;
    this.#onDropped = onDropped;
    this.#reconciler = new ChannelReconciler({
      listeners: this.listeners,
      lingerMs: LINGER_MS,
      driver: {
        // Nothing to listen for; or the caller closed its client: no connection of the
        // store's own outlives it (waiters poll, and their tries fail).
        wantsConnection: () => (this.listeners.size > 0 || this.#grantsWanted) && !redis.isEnded(),
        alwaysWanted: () => (this.#grantsWanted ? [grantChannel] : []),
        open: () => {
          const opened = redis.openSubscriber(
            (channel, message) => (channel === grantChannel ? this.#onGrant(message) : this.listeners.notify(channel)),
            // (Re)connected: retry whatever failed to subscribe. Resubscribing what was
            // subscribed before a reconnect is the client's own job.
            () => this.#reconciler.sync(),
            () => this.#drop(opened),
          );
          return opened;
        },
        opened: () => {
          this.#unwatchClient = redis.onEnd(() => this.#clientEnded());
          this.#keepingAlive = false; // opened without keeping the process alive
          this.#keepAliveWhileWaited();
          return true;
        },
        apply: async (subscriber, wanted, gone) => {
          if (wanted.length > 0) await subscriber.subscribe(wanted);
          if (gone.length > 0) await subscriber.unsubscribe(gone).catch(noop);
        },
        // One that arrives after close(), or idle: closed, or it would reconnect forever.
        discard: (subscriber) => subscriber.close().catch(noop),
        isDead: (subscriber) => subscriber.isDead(),
        dropped: (subscriber) => this.#dropped(subscriber),
      },
    });
  }

  /** Whether grants can reach the store: its grant channel is subscribed. */
  get grantsListening() {
    return !this.#closed && this.#reconciler.isSubscribed(this.#grantChannel);
  }

  /** The connection in use (grants queued with another cannot reach their owner). */
  get connection() {
    return this.#reconciler.connection;
  }

  /** Adds a listener on `channel`, subscribing the grant channel too; see RedisLockStore#subscribe. */
  add(channel, onReleased) {
    if (!this.#grantsWanted) {
      this.#grantsWanted = true;
      this.#reconciler.sync();
    }
    const unsubscribe = this.listeners.add(channel, onReleased);
    // The connection ended for good: this waiter opens a new one.
    if (this.#reconciler.connection === null) this.#reconciler.sync();
    return unsubscribe;
  }

  /** Drops every listener and the connection. */
  async close() {
    this.#closed = true;
    this.listeners.clear();
    const subscriber = this.#reconciler.connection;
    this.#reconciler.stop();
    this.#unwatchClient();
    this.#unwatchClient = noop;
    if (subscriber !== null) await subscriber.close();
  }

  #changedChannel(channel) {
    if (!this.listeners.has(channel)) this.#onChannelIdle(channel);
    this.#keepAliveWhileWaited();
    this.#reconciler.changed(channel);
  }

  #keepAliveWhileWaited() {
    const subscriber = this.#reconciler.connection;
    const wanted = this.listeners.size > 0;
    if (subscriber === null || wanted === this.#keepingAlive) return;
    this.#keepingAlive = wanted;
    subscriber.keepAlive(wanted);
  }

  /**
   * Forgets a connection that will not come back (its client gave up reconnecting):
   * the store stops queueing owners, and those it queued leave the queues; a release
   * wakes them no more, and they poll. The next wait opens a new connection.
   */
  #drop(subscriber) {
    if (subscriber !== this.#reconciler.connection) return; // closed, or dropped already
    this.#reconciler.forget();
    this.#dropped(subscriber);
  }

  #dropped(subscriber) {
    this.#unwatchClient();
    this.#unwatchClient = noop;
    this.#onDropped();
    subscriber.close().catch(noop);
  }

  #clientEnded() {
    const subscriber = this.#reconciler.connection;
    if (subscriber !== null) this.#drop(subscriber);
    for (const channel of this.listeners.channels()) this.listeners.notify(channel);
  }
}

module.exports = { RedisSubscriptions };
