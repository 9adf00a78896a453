'use strict';
/**
 * What a RedisLockStore remembers of the owners it queued, so that a grant (a release
 * that handed a lease to one of them, told on the store's grant channel) reaches the
 * right waiter, or is released when none takes it:
 * - queued: owner -> { key, channel, sentAt (performance.now() when the last acquire
 *   that queued it was sent) }, oldest try first; and the same owners by their key's
 *   release channel (`queuedOn`).
 * - answered: queued owners the store then answered with a lease: owner ->
 *   { fencingToken, sentAt }. A grant can reach the store after its owner's try found
 *   the lease already handed to it and was answered with it; the engine then holds the
 *   lease and no longer listens for it: no release then.
 * - tries that may queue their owner, still unanswered (owner -> lease name), and the
 *   grants that reached the store before such a try's answer, unclaimed (owner ->
 *   fencing token): the try answers with it (`RedisLockStore#queueingTry`).
 */

/** Queued owners remembered before those silent for FORGET_QUEUED_MS are forgotten. */
const MAX_QUEUED = 4096;
const FORGET_QUEUED_MS = 60_000;

class QueuedOwners {
  queued = new Map();
  queuedOn = new Map();
  answered = new Map();
  tries = new Map();
  kept = new Map();

  /**
   * Remembers that `owner` was queued for `key` (release channel `channel`) by a try
   * sent at `sentAt`. The map is kept in the order of the owners' last tries, so the
   * oldest are first: owners that have not asked for a minute (their waiters are gone)
   * are forgotten from the front, and so is the oldest beyond MAX_QUEUED.
   */
  rememberQueued(owner, key, channel, sentAt) {
    this.forgetQueued(owner);
    let owners = this.queuedOn.get(channel);
    if (owners === undefined) {
      owners = new Set();
      this.queuedOn.set(channel, owners);
    }
    owners.add(owner);
    this.queued.set(owner, { key, channel, sentAt });
    for (const [oldest, old] of this.queued) {
      if (this.queued.size <= MAX_QUEUED && sentAt - old.sentAt <= FORGET_QUEUED_MS) break;
      this.forgetQueued(oldest);
    }
  }

  /** Forgets `owner` as queued through this store; its entry, if it had one. */
  forgetQueued(owner) {
    const entry = this.queued.get(owner);
    if (entry === undefined) return undefined;
    this.queued.delete(owner);
    const owners = this.queuedOn.get(entry.channel);
    if (owners !== undefined && owners.delete(owner) && owners.size === 0) this.queuedOn.delete(entry.channel);
    return entry;
  }

  /** `owner`, queued, was answered with a lease: a late grant of it is not released. */
  rememberAnswered(owner, fencingToken, sentAt) {
    const owners = this.answered;
    owners.delete(owner);
    owners.set(owner, { fencingToken, sentAt });
    for (const [oldest, old] of owners) {
      if (owners.size <= MAX_QUEUED && sentAt - old.sentAt <= FORGET_QUEUED_MS) break;
      owners.delete(oldest);
    }
  }

  /** The owners queued on `channel`'s key, forgotten here; each with its key. */
  takeQueuedOn(channel) {
    const owners = this.queuedOn.get(channel);
    if (owners === undefined) return [];
    return [...owners].map((owner) => ({ owner, key: this.forgetQueued(owner).key }));
  }

  /** Every queued owner, forgotten here; each with its key. */
  takeAll() {
    const all = [...this.queued].map(([owner, { key }]) => ({ owner, key }));
    this.queued.clear();
    this.queuedOn.clear();
    return all;
  }
}

module.exports = { QueuedOwners };
