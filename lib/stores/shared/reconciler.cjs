'use strict';
/**
 * One reconciler for the release announcements of the stores that have them: Redis
 * channels (SUBSCRIBE) and PostgreSQL channels (LISTEN). The store keeps its listeners
 * (a ReleaseListeners whose `onChange` calls `changed`), and a driver that knows its
 * server; this brings the server's subscriptions in line with the listeners:
 *
 * - One pass at a time, from the next microtask: every change of a turn (thousands of
 *   waiters that give up together, a waiter that leaves as the next arrives) is one
 *   pass, and a pass costs what changed, not every channel.
 * - The connection is opened by the first pass that needs one, and forgotten (`forget`)
 *   when the driver sees it fail; the next pass opens another.
 * - A channel whose last listener left stays subscribed for `lingerMs` (a key waited
 *   for again and again keeps its channel); a connection of the store's own with no
 *   listener at all is closed after `connectionLingerMs`, when the driver allows it.
 * - A subscription that fails is tried again by the next pass; one that cannot be
 *   undone is left: it only costs messages that find no listener.
 *
 * The driver (all but `open` and `apply` optional):
 *   open()                     a connection (or a promise of one); throws: none now
 *   apply(conn, wanted, gone)  subscribes `wanted`, unsubscribes `gone`; rejects on failure
 *   wantsConnection()          whether a pass with no connection should open one
 *   alwaysWanted()             channels subscribed whatever the listeners (Redis grants)
 *   opened(conn)               a new connection is in use (`connection`); false: discard it
 *   openFailed()               open threw (a retry timer, say)
 *   discard(conn)              closes a connection nobody uses
 *   isDead(conn)               after a failed apply: the connection will not come back
 *   dropped(conn)              such a connection was forgotten
 *   closesWhenIdle(conn)       whether the store may close it once idle (its own)
 */

function noop() {}

class ChannelReconciler {
  #listeners;
  #driver;
  #lingerMs;
  #connectionLingerMs;
  /** The connection in use, or null. */
  #connection = null;
  #subscribed = new Set();
  // Channels that gained their first listener or lost their last since the last pass,
  // and those whose subscription failed: a pass looks at these, not at every channel.
  #changed = new Set();
  // Subscribed channels left without listeners: since when (performance.now()), oldest
  // first; and since when the connection has had no listener at all.
  #idleSince = new Map();
  #connectionIdleSince = undefined;
  #timer = undefined;
  #timerAt = Infinity;
  #dirty = false;
  #running = null;
  #opening = false;
  #stopped = false;

  /**
   * @param {{ listeners: import('./release-listeners.cjs').ReleaseListeners, driver: object,
   *   lingerMs?: number, connectionLingerMs?: number }} options
   */
  constructor({ listeners, driver, lingerMs = 0, connectionLingerMs = Infinity }) {
    this.#listeners = listeners;
    this.#driver = driver;
    this.#lingerMs = lingerMs;
    this.#connectionLingerMs = connectionLingerMs;
  }

  /** The connection in use, or null. */
  get connection() {
    return this.#connection;
  }

  /** Whether `channel`'s subscription is in place on the current connection. */
  isSubscribed(channel) {
    return this.#subscribed.has(channel);
  }

  /** The subscribed channels. */
  subscribed() {
    return [...this.#subscribed];
  }

  /**
   * `channel` gained its first listener or lost its last. One with no listener that is
   * not subscribed needs nothing (a subscription in flight for it looks again when it is
   * answered).
   */
  changed(channel) {
    if (this.#listeners.has(channel) || this.#subscribed.has(channel)) this.#changed.add(channel);
    else this.#changed.delete(channel);
    this.sync();
  }

  /** Asks for a pass. */
  sync() {
    this.#dirty = true;
    if (this.#running !== null || this.#stopped) return;
    this.#running = Promise.resolve()
      .then(() => this.#loop())
      .catch(noop);
  }

  /**
   * The running pass, to wait for before undoing its subscriptions; none while it waits
   * for a connection to open (the server may be long in answering: that connection is
   * discarded as it arrives).
   */
  settled() {
    return this.#running === null || this.#opening ? Promise.resolve() : this.#running;
  }

  /** Forgets the connection (closing it is the caller's); the next pass opens another. */
  forget() {
    this.#connection = null;
    this.#subscribed.clear();
    this.#idleSince.clear();
    this.#connectionIdleSince = undefined;
  }

  /** No more passes: forgets everything. The connection is the caller's to close. */
  stop() {
    this.#stopped = true;
    this.forget();
    this.#changed.clear();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * The passes are over as the last one ends (#running is cleared there, not a microtask
   * later): a change that comes just after a pass with nothing to send starts a pass of
   * its own instead of being left for the next one (a linger timer's, a second later).
   */
  async #loop() {
    const driver = this.#driver;
    try {
      while (this.#dirty && !this.#stopped) {
        this.#dirty = false;
        if (this.#connection === null && !(await this.#open())) return;
        const connection = this.#connection;
        if (this.#idleConnection(connection)) {
          this.forget();
          await driver.discard?.(connection);
          continue; // a subscribe meanwhile opens a new one
        }
        const now = performance.now();
        const wanted = this.#wanted(now);
        const gone = this.#unwanted(now);
        if (wanted.length === 0 && gone.length === 0) continue;
        for (const c of gone) this.#subscribed.delete(c);
        try {
          await driver.apply(connection, wanted, gone);
        } catch {
          if (connection !== this.#connection) continue;
          // A connection that will never come back is dropped, so that the next pass
          // opens a fresh one; otherwise retried on the next pass (a reconnect's).
          if (driver.isDead?.(connection)) {
            this.forget();
            driver.dropped?.(connection);
            return;
          }
          for (const c of wanted) if (this.#listeners.has(c)) this.#changed.add(c);
          continue;
        }
        if (connection !== this.#connection) continue;
        for (const c of wanted) {
          this.#subscribed.add(c);
          // Its last listener may have left meanwhile: the next pass sees to it.
          if (!this.#listeners.has(c) && !this.#always().includes(c)) this.changed(c);
        }
      }
    } finally {
      this.#running = null;
    }
  }

  /** Opens a connection; false when there is none to use (waiters poll). */
  async #open() {
    const driver = this.#driver;
    if (!(driver.wantsConnection?.() ?? this.#listeners.size > 0)) {
      this.#changed.clear();
      return false;
    }
    let connection;
    this.#opening = true;
    try {
      connection = await driver.open();
    } catch {
      this.#changed.clear();
      driver.openFailed?.();
      return false;
    } finally {
      this.#opening = false;
    }
    if (!this.#stopped) {
      this.#connection = connection;
      if (driver.opened?.(connection) !== false) {
        // A new connection: every channel with listeners is to be subscribed.
        for (const c of this.#listeners.channels()) this.#changed.add(c);
        return true;
      }
      this.#connection = null;
    }
    await driver.discard?.(connection);
    return false;
  }

  #always() {
    return this.#driver.alwaysWanted?.() ?? [];
  }

  /**
   * Whether the connection, one the store may close, has had no listener (and nothing
   * always wanted) for connectionLingerMs; while it has not, a timer comes back for it.
   */
  #idleConnection(connection) {
    if (this.#listeners.size > 0 || this.#always().length > 0 || this.#connectionLingerMs === Infinity) {
      this.#connectionIdleSince = undefined;
      return false;
    }
    if (!(this.#driver.closesWhenIdle?.(connection) ?? true)) return false;
    const now = performance.now();
    this.#connectionIdleSince ??= now;
    if (now - this.#connectionIdleSince >= this.#connectionLingerMs) return true;
    this.#wakeAt(this.#connectionIdleSince + this.#connectionLingerMs, now);
    return false;
  }

  /**
   * The channels to subscribe now: those of #changed that have listeners and are not
   * subscribed, and those always wanted. A subscribed channel whose last listener left
   * starts to linger.
   */
  #wanted(now) {
    const wanted = this.#always().filter((c) => !this.#subscribed.has(c));
    for (const c of this.#changed) {
      if (this.#listeners.has(c)) {
        this.#idleSince.delete(c);
        if (!this.#subscribed.has(c)) wanted.push(c);
      } else if (this.#subscribed.has(c) && !this.#idleSince.has(c)) {
        this.#idleSince.set(c, now);
      }
    }
    this.#changed.clear();
    return wanted;
  }

  /** Subscribed channels without a listener for lingerMs; a timer comes back for the rest. */
  #unwanted(now) {
    const unwanted = [];
    for (const [c, since] of this.#idleSince) {
      // Waited for again since it began to linger: it stays.
      if (this.#listeners.has(c)) {
        this.#idleSince.delete(c);
        continue;
      }
      if (now - since < this.#lingerMs) {
        this.#wakeAt(since + this.#lingerMs, now); // the oldest left: the others are due later
        break;
      }
      unwanted.push(c);
    }
    for (const c of unwanted) this.#idleSince.delete(c);
    return unwanted;
  }

  /** A (non-blocking) timer for a pass at `at`. */
  #wakeAt(at, now) {
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.sync();
    }, Math.max(0, at - now));
    this.#timer.unref?.();
  }
}

module.exports = { ChannelReconciler };
