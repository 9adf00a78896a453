'use strict';
/**
 * An EtcdLockStore's holders and waiters (see "Waiting" at the top of index.cjs): the
 * entries it keeps per key and owner, and how a waiter waits. A waiter's lease is kept
 * alive every ttl/3; it watches the deletion of the key just before its own, and when
 * that goes it is first (the lock is its owner's: offered to the listeners as a grant,
 * released if nobody claims it) or reads who is before it now. The waiters of a key
 * nobody in the store waits for any more leave the queue LINGER_MS later.
 *
 * An entry: { key, owner, ttlMs, lease, name, prefix, end, rev (its key's create
 * revision: the token), state, stopWatch, timer, checkedAt, createdAt }, and for a
 * permit { limit, weight, start, stop } (start and stop: the range of its limit's keys).
 *
 * A permit waiter (permit-keys.cjs says who holds) watches one thing: the first in line
 * (the key before it holds) watches deletions in its limit's range, any of which may let
 * it in; one behind another waiter watches that waiter's key, which is deleted or, when
 * let in, put again unchanged (`touch`). One watcher is woken per event, never a crowd.
 */
const { ReleaseListeners } = require('../shared/release-listeners.cjs');
const { EQUAL, VALUE, DESCEND, BY_CREATE, revisionOf, rangeOf, firstRange, allRange } = require('./requests.cjs');
const { standing } = require('./permit-keys.cjs');

function noop() {}

// The waiters of a key that no listener of this store waits for any more leave the
// queue this long after its last listener left (a handover within the process
// unsubscribes and subscribes again in between).
const LINGER_MS = 1_000;
// Every so many new holders and waiters, the store forgets the holders whose lease has
// run out by its count (a lease never released nor renewed: the engine winds it down
// without a word), so that what it keeps stays bounded by the live leases.
const SWEEP_EVERY = 1_024;
// How long after a lease ran out by the store's count it is forgotten.
const SWEEP_MARGIN_MS = 1_000;

const WAITING = 'waiting';
const GRANTED = 'granted'; // handed over by the watch, offered to the listeners
const HELD = 'held';
const GONE = 'gone';

class EtcdQueue {
  #kv;
  #watches;
  #leases;
  entries = new Map(); // `${key}\0${owner}` -> entry, for this store's holders and waiters
  listeners = new ReleaseListeners((key) => this.listenersChanged(key));
  #permitWaiters = new Map(); // key -> this store's permit waiters on it
  #lingerTimers = new Map(); // key -> timer that drops its waiters
  #untilSweep = SWEEP_EVERY;

  /**
   * @param {object} kv  the client's `kv`
   * @param {import('./watch.cjs').DeletionWatches} watches
   * @param {import('./leases.cjs').EtcdLeases} leases
   */
  constructor(kv, watches, leases) {
    this.#kv = kv;
    this.#watches = watches;
    this.#leases = leases;
  }

  /** `owner`'s entry on `key`, if this store has one. */
  get(key, owner) {
    return this.entries.get(`${key}\u0000${owner}`);
  }

  /** Keeps `e`, and now and then forgets the holders whose lease ran out (SWEEP_EVERY). */
  add(e) {
    this.entries.set(`${e.key}\u0000${e.owner}`, e);
  }

  /** Counts a new holder or waiter; sweeps every SWEEP_EVERY. */
  counted() {
    if ((this.#untilSweep -= 1) === 0) this.sweep();
  }

  /** Drops the listeners and the linger timers; the waiters leave (their promises). */
  close() {
    this.listeners.clear();
    for (const timer of this.#lingerTimers.values()) clearTimeout(timer);
    this.#lingerTimers.clear();
    const work = [];
    for (const e of [...this.entries.values()]) {
      if (e.state === WAITING || e.state === GRANTED) work.push(this.leave(e));
    }
    return work;
  }

  /** Deletes `name` if its value is `owner`; keeps its lease for reuse when it did. */
  async delete(name, owner, lease) {
    const reply = await this.#kv.txn({
      compare: [{ key: name, target: VALUE, result: EQUAL, value: Buffer.from(owner) }],
      success: [{ request_delete_range: { key: name } }],
      failure: [],
    });
    const deleted = reply.succeeded && Number(reply.responses[0].response_delete_range.deleted) > 0;
    if (deleted) this.#leases.keep(lease);
    else this.#leases.revoke(lease);
    return deleted;
  }

  /** Drops what the store keeps for `e` (its watch, its timer); its key stays in etcd. */
  forget(e) {
    e.state = GONE;
    e.stopWatch();
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    const id = `${e.key}\u0000${e.owner}`;
    if (this.entries.get(id) === e) this.entries.delete(id);
    this.#notWaiting(e);
  }

  /** `e`, a permit's entry, waits (its key read not fitting). */
  waiting(e) {
    let waiters = this.#permitWaiters.get(e.key);
    if (waiters === undefined) {
      waiters = new Set();
      this.#permitWaiters.set(e.key, waiters);
    }
    waiters.add(e);
  }

  #notWaiting(e) {
    const waiters = this.#permitWaiters.get(e.key);
    if (waiters?.delete(e) && waiters.size === 0) this.#permitWaiters.delete(e.key);
  }

  /**
   * A grant of `token` on `key` came: this store's permit waiters with a lower token (a
   * key before it) hold too (the weights up to a key fit only if they do up to every
   * key before it), though their watches may not have told them yet. They are let in
   * first, so that the engine sees the tokens rise.
   */
  beforeGrant(key, token) {
    const below = [...(this.#permitWaiters.get(key) ?? [])].filter((e) => e.rev < token && e.state === WAITING);
    for (const e of below.sort((a, b) => a.rev - b.rev)) this.letIn(e, true);
  }

  /**
   * The permit waiter `e` holds: offered to the listeners; once claimed, with `touch`,
   * its key is put again for the waiter behind.
   */
  letIn(e, touch) {
    this.#notWaiting(e);
    e.stopWatch();
    e.state = GRANTED;
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    this.granted(e);
    if (touch && e.state === HELD) this.touch(e);
  }

  /** Forgets the holders whose lease ran out by this store's count (see SWEEP_EVERY). */
  sweep() {
    this.#untilSweep = SWEEP_EVERY;
    const now = performance.now();
    for (const e of [...this.entries.values()]) {
      if (e.state === HELD && e.lease.keptAt + e.lease.granted * 1000 + SWEEP_MARGIN_MS < now) this.forget(e);
    }
  }

  /** A waiter leaves the queue: its key deleted, its lease kept for reuse. */
  async leave(e) {
    this.forget(e);
    await this.delete(e.name, e.owner, e.lease).catch(() => this.#leases.revoke(e.lease));
  }

  /** Keeps a waiter's lease alive every ttl/3 while it waits; a lapsed one leaves. */
  keepWaiting(e) {
    e.timer = setTimeout(async () => {
      e.timer = undefined;
      if (e.state !== WAITING) return;
      const sentAt = performance.now();
      const ttl = await this.#leases.keepAlive(e.lease, sentAt + e.ttlMs / 3).catch(() => undefined);
      if (e.state !== WAITING) return;
      if (ttl === 0) return void this.forget(e); // its key went with the lease
      if (ttl > 0) e.lease.keptAt = sentAt;
      this.keepWaiting(e);
    }, Math.max(1, Math.floor(e.ttlMs / 3)));
    e.timer.unref?.();
  }

  /**
   * Watches the deletion of `ahead`, the key just before `e`'s, from the revision after
   * `revision` (where it was read): a deletion in between is not missed.
   */
  watchAhead(e, ahead, aheadIsFirst, revision) {
    e.stopWatch();
    const gone = () => {
      if (e.state !== WAITING) return;
      if (aheadIsFirst) this.granted(e);
      else this.recheck(e);
    };
    // A watch that etcd ends (a compacted revision): the queue is read again.
    e.stopWatch = this.#watches.watch(ahead, revision + 1, gone, () => this.recheckLater(e));
  }

  /** Reads who is ahead of `e` now: nobody (the lock is its), or a key to watch. */
  async recheck(e) {
    if (e.state !== WAITING) return;
    if (e.limit !== undefined) return this.#recheckPermits(e);
    e.checkedAt = performance.now();
    try {
      const reply = await this.#kv.txn({
        compare: [],
        success: [
          firstRange(e.prefix, e.end),
          {
            request_range: {
              key: e.prefix,
              range_end: e.end,
              sort_order: DESCEND,
              sort_target: BY_CREATE,
              max_create_revision: String(e.rev - 1),
              limit: 1,
              keys_only: true,
            },
          },
          { request_range: { key: e.name, keys_only: true } },
        ],
        failure: [],
      });
      if (e.state !== WAITING) return;
      if (rangeOf(reply, 2).length === 0) return void this.forget(e); // its key lapsed with its lease
      const first = rangeOf(reply, 0)[0]?.key;
      const ahead = rangeOf(reply, 1)[0]?.key;
      if (ahead === undefined) return void this.granted(e);
      this.watchAhead(e, ahead, ahead.equals(first), revisionOf(reply, 'a read of the queue'));
    } catch {
      // Nobody awaits a recheck: a failure (etcd down, an odd answer) is tried again later.
      this.recheckLater(e);
    }
  }

  /** A permit waiter: `at` is where its key stood in a read at `revision` (see the top). */
  waitForPermits(e, at, revision) {
    e.stopWatch();
    const again = () => this.recheck(e);
    const lost = () => this.recheckLater(e);
    e.stopWatch = at.predFits
      ? this.#watches.watch(e.start, revision + 1, again, lost, { rangeEnd: e.stop })
      : this.#watches.watch(at.pred, revision + 1, again, lost, { puts: true });
  }

  /** Reads a permit waiter's queue: it holds now, or waits on what `waitForPermits` picks. */
  async #recheckPermits(e) {
    e.checkedAt = performance.now();
    try {
      const reply = await this.#kv.range(allRange(e.start, e.stop).request_range);
      if (e.state !== WAITING) return;
      const at = standing(reply.kvs, e.prefix, e.name, e.limit);
      if (at === undefined) return void this.forget(e); // its key lapsed with its lease
      if (!at.fits) return void this.waitForPermits(e, at, revisionOf(reply, 'a read of the queue'));
      this.beforeGrant(e.key, e.rev);
      this.letIn(e, at.after);
    } catch {
      this.recheckLater(e);
    }
  }

  /**
   * Puts `e`'s key again as it is (value, lease; its create revision stays): the waiter
   * behind it, which read it waiting, watches it and reads its queue again.
   */
  touch(e) {
    const value = Buffer.from(e.owner);
    this.#kv
      .txn({
        compare: [{ key: e.name, target: VALUE, result: EQUAL, value }],
        success: [{ request_put: { key: e.name, value, lease: e.lease.id } }],
        failure: [],
      })
      .catch(noop); // the waiter behind reads again when its engine asks (RECHECK_MS)
  }

  recheckLater(e) {
    if (e.state !== WAITING) return;
    e.stopWatch();
    const timer = setTimeout(() => this.recheck(e), 1_000);
    timer.unref?.();
    e.stopWatch = () => clearTimeout(timer);
  }

  /** `e` is first: the lock is its owner's. Offered to the listeners; released if unclaimed. */
  granted(e) {
    e.state = GRANTED;
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    const age = Math.max(0, performance.now() - e.lease.keptAt);
    const claimed = this.listeners.offer(e.key, { owner: e.owner, fencingToken: e.rev, age });
    if (claimed) {
      if (e.state === GRANTED) e.state = HELD;
      return;
    }
    if (e.state === GRANTED) this.leave(e).catch(noop);
  }

  /** A key lost its last listener: its waiters leave, unless a listener comes back meanwhile. */
  listenersChanged(key) {
    const timer = this.#lingerTimers.get(key);
    if (timer !== undefined) clearTimeout(timer);
    this.#lingerTimers.delete(key);
    if (this.listeners.has(key)) return;
    const since = performance.now();
    const drop = setTimeout(() => {
      this.#lingerTimers.delete(key);
      if (this.listeners.has(key)) return;
      for (const e of [...this.entries.values()]) {
        if (e.key === key && e.state === WAITING && e.createdAt <= since) this.leave(e).catch(noop);
      }
    }, LINGER_MS);
    drop.unref?.();
    this.#lingerTimers.set(key, drop);
  }
}

module.exports = { EtcdQueue, WAITING, GRANTED, HELD, GONE };
