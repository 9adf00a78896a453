'use strict';
// The name a candidate gives itself, where `leader()` can read it back. On a JS store the
// name is written into the owner the store keeps (`<name>@<owner>`, the name
// percent-encoded so that its first `@` ends it): every process that inspects the store
// reads it there. A memory store lives in one process: its names are kept beside it.

const { describe } = require('../common/describe.cjs');
const { checkWellFormed } = require('../common/well-formed.cjs');
const { candidateView } = require('./candidate-store.cjs');

/** The longest name a candidate may give: it is written into every owner it holds with. */
const MAX_NAME_LENGTH = 128;

function checkName(name) {
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(`name must be a non-empty string, got ${describe(name)}`);
  }
  if (name.length > MAX_NAME_LENGTH) {
    throw new RangeError(`name must be at most ${MAX_NAME_LENGTH} characters, got ${name.length}`);
  }
  checkWellFormed(name, 'name');
  return name;
}

/** `{ name, owner }` from an owner a store keeps; `name` undefined when none is written in it. */
function splitOwner(stored) {
  const at = stored.indexOf('@');
  // A percent-encoded name has no ':'; an owner id drawn with a host prefix starts with one.
  if (at <= 0 || stored.lastIndexOf(':', at) !== -1) return { name: undefined, owner: stored };
  try {
    return { name: decodeURIComponent(stored.slice(0, at)), owner: stored.slice(at + 1) };
  } catch {
    return { name: undefined, owner: stored };
  }
}

/**
 * The names of one API's candidates: a named view per (store, name), made once so that
 * the engine sees one store (one subscription, local handoff among its campaigns), and
 * the names of the leaders of memory stores, by store and key; and the watchers told
 * when a candidate of this process wins or leaves (a memory store announces nothing).
 */
class CandidateNames {
  constructor(isMemory) {
    this.isMemory = isMemory;
    this.views = new WeakMap();
    this.memoryLeaders = new WeakMap();
    // store -> key -> Set of functions called when a candidate here wins or leaves.
    this.watchers = new WeakMap();
  }

  /** Calls `fn()` whenever a candidate of this API wins or leaves `key` on `store`; returns the stop. */
  watch(store, key, fn) {
    let byKey = this.watchers.get(store);
    if (byKey === undefined) this.watchers.set(store, (byKey = new Map()));
    let set = byKey.get(key);
    if (set === undefined) byKey.set(key, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0 && byKey.get(key) === set) byKey.delete(key);
    };
  }

  /** A candidate here won or left `key`: its watchers look again. */
  changed(store, key) {
    const set = this.watchers.get(store)?.get(key);
    if (set) for (const fn of [...set]) fn();
  }

  /** The store a candidate named `name` (or none) campaigns through: a view of a JS store. */
  storeFor(store, name) {
    if (this.isMemory(store)) return store;
    let byName = this.views.get(store);
    if (byName === undefined) this.views.set(store, (byName = new Map()));
    const prefix = name === undefined ? '' : `${encodeURIComponent(name)}@`;
    let view = byName.get(prefix);
    if (view === undefined) byName.set(prefix, (view = candidateView(store, prefix)));
    return view;
  }

  /** A memory store's leader of `key` is `owner`, named `name` (none: it left). */
  setMemoryLeader(store, key, owner, name) {
    let byKey = this.memoryLeaders.get(store);
    if (byKey === undefined) this.memoryLeaders.set(store, (byKey = new Map()));
    if (owner === undefined) byKey.delete(key);
    else byKey.set(key, { owner, name });
  }

  /** `{ name, owner }` of the holder whose owner the store shows as `stored`. */
  read(store, key, stored) {
    if (this.isMemory(store)) {
      const known = this.memoryLeaders.get(store)?.get(key);
      return { name: known?.owner === stored ? known.name : undefined, owner: stored };
    }
    return splitOwner(stored);
  }
}

module.exports = { CandidateNames, checkName, splitOwner, MAX_NAME_LENGTH };
