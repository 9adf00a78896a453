'use strict';
/**
 * `EtcdLockStore#acquire` for a permit (limit > 1; see "Permits" at the top of
 * index.cjs): its first transaction, and what its answer means.
 *
 * - A try that waits (`{ queue: true }`) puts its key when no key of another limit is on
 *   the lock, and reads its limit's keys: it holds when the weights up to its key fit
 *   (permit-keys.cjs), and waits otherwise (waiting.cjs).
 * - A try that does not wait puts its key when the lock has no key at all; else it reads
 *   them, and when its weight fits after theirs, puts its key provided no key was put
 *   since that read (a compare of the range's mod revisions), and reads again if one was.
 *   It never writes a key it would have to delete.
 * - Keys of another limit: `{ limit }` (theirs), and nothing written.
 */
const { MOD, LESS, revisionOf, rangeOf, firstRange, allRange, noKeys } = require('./requests.cjs');
const { keyPermits, standing, taken } = require('./permit-keys.cjs');
const { WAITING } = require('./waiting.cjs');

// A try that does not wait reads the lock again at most this many times when keys come
// in between its read and its put; then it answers undefined (the engine tries again).
const MAX_READS = 8;

class EtcdPermits {
  #kv;
  #queue;
  #leases;

  /**
   * @param {object} kv  the client's `kv`
   * @param {import('./waiting.cjs').EtcdQueue} queue
   * @param {import('./leases.cjs').EtcdLeases} leases
   */
  constructor(kv, queue, leases) {
    this.#kv = kv;
    this.#queue = queue;
    this.#leases = leases;
  }

  /** The first transaction of entry `e`'s acquire (`put` writes its key). */
  request(e, put, queue) {
    if (queue) {
      return {
        compare: [noKeys(e.prefix, e.start), noKeys(e.stop, e.end)],
        success: [put, allRange(e.start, e.stop)],
        failure: [firstRange(e.prefix, e.end)],
      };
    }
    return { compare: [noKeys(e.prefix, e.end)], success: [put], failure: [allRange(e.prefix, e.end)] };
  }

  /**
   * What the first transaction's `reply` answers: `{ fencingToken }`, `{ limit }` or
   * undefined (a waiter then waits). `until`: when a try of a transaction stops.
   */
  async answer(e, reply, put, queue, until) {
    if (queue) {
      if (!reply.succeeded) return this.#disagrees(e, rangeOf(reply, 0));
      return this.#stands(e, rangeOf(reply, 1), revisionOf(reply, 'acquire'), true);
    }
    for (let reads = 1; ; reads++) {
      if (reply.succeeded) {
        e.rev = revisionOf(reply, 'acquire');
        this.#queue.add(e);
        return { fencingToken: e.rev };
      }
      const kvs = rangeOf(reply, 0);
      // A try whose put was applied and its answer lost finds its key.
      if (kvs.some((kv) => kv.key.equals(e.name))) return this.#stands(e, kvs, revisionOf(reply, 'acquire'), false);
      if (kvs.length > 0 && keyPermits(e.prefix, kvs[0].key).limit !== e.limit) return this.#disagrees(e, kvs);
      if (taken(kvs, e.prefix) + e.weight > e.limit || reads >= MAX_READS) {
        this.#leases.keep(e.lease); // nothing of ours was written
        return undefined;
      }
      const seen = revisionOf(reply, 'a read of the lock');
      const request = {
        compare: [{ key: e.prefix, range_end: e.end, target: MOD, result: LESS, mod_revision: String(seen + 1) }],
        success: [put],
        failure: [allRange(e.prefix, e.end)],
      };
      try {
        reply = await this.#leases.retried(until, () => this.#kv.txn(request, this.#leases.callOptions(until)));
      } catch (err) {
        this.#leases.revoke(e.lease); // the put may have been applied: the revoke takes it
        throw err;
      }
    }
  }

  /** Keys of another limit are on the lock (`kvs`: its first ones): theirs is answered. */
  #disagrees(e, kvs) {
    this.#leases.keep(e.lease);
    const first = kvs[0];
    return first === undefined ? undefined : { limit: keyPermits(e.prefix, first.key).limit };
  }

  /** `e`'s key is among `kvs` (read at `revision`): it holds, waits, or leaves. */
  async #stands(e, kvs, revision, queue) {
    const at = standing(kvs, e.prefix, e.name, e.limit);
    if (at === undefined) {
      this.#leases.revoke(e.lease); // its key went with its lease meanwhile
      return undefined;
    }
    e.rev = at.rev;
    this.#queue.add(e);
    if (at.fits) {
      // Read waiting by a waiter behind it (a try sent again): that one is told.
      if (at.after) this.#queue.touch(e);
      return { fencingToken: e.rev };
    }
    e.state = WAITING;
    if (!queue) {
      await this.#queue.leave(e); // a try sent again that does not wait: it leaves
      return undefined;
    }
    this.#queue.waiting(e);
    this.#queue.keepWaiting(e);
    this.#queue.waitForPermits(e, at, revision);
    return undefined;
  }
}

module.exports = { EtcdPermits };
