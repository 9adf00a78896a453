'use strict';
/**
 * A RedisLockStore's turns on contended keys: which leases it released with owners
 * queued are to be handed to the first of them (WAKE), and which it lets go at once.
 *
 * Code that releases a lock often takes it again at once (a loop of executions): a
 * lease released while owners are queued, none of them for the hand-off time yet, is
 * left to that, as every polling lock lets it be. If the store does not ask for the
 * key again before the event loop's next turn, the first queued owner is handed the
 * key (`wake`). Such leases (let go, not taken again) are remembered, at most
 * LEFT_LEASES_MAX, oldest first: their next release hands the key over at once, as
 * with handOffAfter 0, instead of leaving it free for a re-take that does not come.
 * A lease is forgotten there when the store takes it again right after such a release
 * (`#releasedAtOnce` holds those until the event loop's next turn): a loop of
 * executions gets its turns back.
 */

const nextTurn = typeof setImmediate === 'function' ? setImmediate : (fn) => setTimeout(fn, 0);

/** How many leases a store remembers as left: the most recent, not every key it used. */
const LEFT_LEASES_MAX = 1_024;

class Turns {
  #wakes = new Set();
  #leftLeases = new Set();
  #releasedAtOnce = new Set();
  // One callback at the event loop's next turn serves both (#atTurnEnd).
  #turnEndScheduled = false;
  #wake;

  /** @param {(lease: string, closing: boolean) => void} wake  hands `lease` to its first queued owner */
  constructor(wake) {
    this.#wake = wake;
  }

  /** The store asks for `lease` again: no need to wake a queued owner, and its turns come back. */
  retaken(lease) {
    this.#wakes.delete(lease);
    if (this.#releasedAtOnce.delete(lease)) this.#leftLeases.delete(lease);
  }

  /** Whether a retake could change anything (cheap test before naming the key). */
  get watching() {
    return this.#wakes.size > 0 || this.#releasedAtOnce.size > 0;
  }

  /** Whether `lease`'s next release hands it over at once (see the top). */
  atOnce(lease) {
    return this.#leftLeases.size > 0 && this.#leftLeases.has(lease);
  }

  /**
   * `lease` was released without keeping this store's turn: still one it lets go; if
   * the store asks for it again before the event loop's next turn, it runs executions
   * in a loop, and its releases keep turns again.
   */
  releasedAtOnce(lease) {
    this.#rememberLeft(lease);
    this.#releasedAtOnce.add(lease);
    this.#atTurnEnd();
  }

  /** `lease` was released with owners queued: woken at the next turn unless taken again. */
  wakeLater(lease) {
    this.#wakes.add(lease);
    this.#atTurnEnd();
  }

  /**
   * Runs the wakes `wakeLater` scheduled. `closing`: the caller may close its client
   * next (the store sends them in one command each).
   */
  wakeNow(closing = false) {
    if (this.#wakes.size === 0) return;
    const leases = [...this.#wakes];
    this.#wakes.clear();
    for (const lease of leases) {
      this.#rememberLeft(lease);
      this.#wake(lease, closing);
    }
  }

  #rememberLeft(lease) {
    this.#leftLeases.delete(lease);
    this.#leftLeases.add(lease);
    if (this.#leftLeases.size > LEFT_LEASES_MAX) this.#leftLeases.delete(this.#leftLeases.values().next().value);
  }

  /**
   * At the event loop's next turn, what this turn's releases left to it: the leases the
   * store did not take again are woken, and those released without a turn are no longer
   * watched.
   */
  #atTurnEnd() {
    if (this.#turnEndScheduled) return;
    this.#turnEndScheduled = true;
    nextTurn(() => {
      this.#turnEndScheduled = false;
      this.#releasedAtOnce.clear();
      this.wakeNow();
    });
  }
}

module.exports = { Turns };
