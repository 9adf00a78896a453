'use strict';
/**
 * The wake-on-release listeners of a lock store (`RedisLockStore`, `PostgresLockStore`):
 * channel -> set of listener entries, reference counted per channel. The store keeps its
 * own channel naming, argument checks and connection; this only does the bookkeeping.
 *
 * `onChange(channel)` is called when a channel gains its first listener or loses its
 * last: the store then brings its server-side subscriptions in line.
 */
class ReleaseListeners {
  #entries = new Map();
  #onChange;

  /** @param {(channel: string) => void} onChange */
  constructor(onChange) {
    this.#onChange = onChange;
  }

  /**
   * Adds `onReleased` on `channel` (the same function added twice counts twice).
   * Returns a function that removes it (idempotent).
   */
  add(channel, onReleased) {
    let entries = this.#entries.get(channel);
    if (entries === undefined) {
      entries = new Set();
      this.#entries.set(channel, entries);
    }
    const entry = { onReleased };
    entries.add(entry);
    if (entries.size === 1) this.#onChange(channel);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      const current = this.#entries.get(channel);
      if (current === undefined || !current.delete(entry)) return;
      if (current.size === 0) {
        this.#entries.delete(channel);
        this.#onChange(channel);
      }
    };
  }

  /** How many channels have at least one listener. */
  get size() {
    return this.#entries.size;
  }

  /** Whether `channel` has at least one listener. */
  has(channel) {
    return this.#entries.has(channel);
  }

  /** The channels that have at least one listener. */
  channels() {
    return [...this.#entries.keys()];
  }

  /** Calls every listener of `channel`; a listener that throws is ignored. */
  notify(channel) {
    const entries = this.#entries.get(channel);
    if (entries === undefined) return;
    for (const entry of [...entries]) {
      try {
        entry.onReleased();
      } catch {
        // A listener's failure is its own; it must not stop the others or the client.
      }
    }
  }

  /**
   * Offers a grant to the listeners of `channel`, one at a time, until one claims it
   * (returns true). Returns whether one did; a listener that throws does not claim.
   */
  offer(channel, grant) {
    const entries = this.#entries.get(channel);
    if (entries === undefined) return false;
    for (const entry of [...entries]) {
      try {
        if (entry.onReleased(grant) === true) return true;
      } catch {
        // as in notify
      }
    }
    return false;
  }

  /** Drops every listener, without calling `onChange`; their unsubscribe functions become no-ops. */
  clear() {
    this.#entries.clear();
  }
}

module.exports = { ReleaseListeners };
