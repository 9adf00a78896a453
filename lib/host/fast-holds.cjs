'use strict';
// The fast holders of one memory store (fast-path.cjs): key -> the Execution holding it.
// Most processes hold one key of a store at a time, and a Map that gains and loses one
// entry per execution rebuilds its table every few operations: the first key held sits
// in a slot of its own, and a Map is made only for keys held beside it.

class FastHolds {
  constructor() {
    // One key held and its holder, or undefined.
    this.key = undefined;
    this.rec = undefined;
    // The other keys held, once two are held at once.
    this.more = undefined;
    this.size = 0;
  }

  get(key) {
    if (this.key === key) return this.rec;
    return this.more === undefined ? undefined : this.more.get(key);
  }

  set(key, rec) {
    if (this.key === key) {
      this.rec = rec;
      return;
    }
    const more = this.more;
    if (more !== undefined && more.has(key)) {
      more.set(key, rec);
      return;
    }
    if (this.key === undefined) {
      this.key = key;
      this.rec = rec;
    } else {
      (this.more ??= new Map()).set(key, rec);
    }
    this.size += 1;
  }

  delete(key) {
    if (this.key === key) {
      this.key = undefined;
      this.rec = undefined;
      this.size -= 1;
    } else if (this.more !== undefined && this.more.delete(key)) {
      this.size -= 1;
    }
  }

  /** The keys held, in a new array. */
  keys() {
    const keys = this.more === undefined ? [] : [...this.more.keys()];
    if (this.key !== undefined) keys.unshift(this.key);
    return keys;
  }

  /** The holders, in a new array. */
  values() {
    const values = this.more === undefined ? [] : [...this.more.values()];
    if (this.key !== undefined) values.unshift(this.rec);
    return values;
  }

  clear() {
    this.key = undefined;
    this.rec = undefined;
    this.more = undefined;
    this.size = 0;
  }
}

module.exports = { FastHolds };
