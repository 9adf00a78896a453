'use strict';
// The executions queued behind one fast holder (fast-path.cjs), first come first, and the
// earliest deadline among them: a list through `Execution#nextWaiter` (an array's shift
// was a quarter of a contended handoff's time), which goes from holder to holder with
// the key.

class FastWaiters {
  constructor(held, key) {
    this.first = undefined;
    this.last = undefined;
    // Where the key's holder is found (a FastHolds), and the key.
    this.held = held;
    this.key = key;
    // The earliest `waitUntil` of the waiters queued with a deadline since it was set
    // (served ones may still count: the deadline is then early, never late), and the
    // system clock's timer for it.
    this.deadline = Infinity;
    this.timer = undefined;
  }

  push(rec) {
    if (this.last === undefined) this.first = rec;
    else this.last.nextWaiter = rec;
    this.last = rec;
  }

  /** The first waiter, taken out; undefined when none is left. */
  shift() {
    const rec = this.first;
    if (rec === undefined) return undefined;
    this.first = rec.nextWaiter;
    rec.nextWaiter = undefined;
    if (this.first === undefined) this.last = undefined;
    return rec;
  }

  /** The earliest `waitUntil` of the waiters queued now (Infinity: none has a deadline). */
  earliest() {
    let at = Infinity;
    for (let rec = this.first; rec !== undefined; rec = rec.nextWaiter) if (rec.waitUntil < at) at = rec.waitUntil;
    return at;
  }
}

module.exports = { FastWaiters };
