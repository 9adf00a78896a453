'use strict';
/**
 * `leasehold/redis`: a `LockStore` on Redis, for ioredis (v5) and node-redis (v4/v5)
 * clients, standalone or Redis Cluster. Plain JavaScript, no dependency: it works with
 * the client object it is given, recognised by its shape.
 *
 * What it promises
 * - One round trip per `acquire`, `renew` and `release`: each is one Lua script, run
 *   with EVALSHA; when the server does not know the script (NOSCRIPT: first use, after
 *   SCRIPT FLUSH, after a restart, on another cluster node) the call is repeated once
 *   with EVAL, which also caches the script on that server.
 * - The fencing token is issued in the same script as the lease, and only ever increases
 *   per key: across release, across expiry, and across a Redis restart that lost all
 *   data (see ACQUIRE below), as long as the server's wall clock does not step back.
 * - `renew` answering `false` and `release` answering `false` are definitive: the live
 *   lease is not this owner's. Every Redis or client error (connection refused, timeout,
 *   READONLY, WRONGTYPE, ...) rejects unchanged; nothing is turned into `false` or
 *   `undefined`.
 * - `isLocked` and `ttl` are advisory: the answer may be stale when it arrives.
 * - `minReplicas`: grants, renewals and raised token floors count only once that many
 *   replicas hold them (WAIT, replicas.cjs); grants on release are off then. Failover,
 *   Sentinel and Cluster replicas: docs/failover.md.
 * - Grant on release: an `acquire` that asks to be queued (`{ queue: true }`, as the
 *   engine does) and finds the key held puts its owner at the end of the key's queue.
 *   The holder's `release` then hands the lease straight to the first queued owner
 *   still waiting (a new lease and a new token, in the same script) and tells that
 *   owner's store on the store's own channel; the store passes the grant to its
 *   `subscribe` listener. So a handover costs the release and one message: no retry,
 *   no crowd of waiters woken to race for the key, and waiters are served in order.
 *
 * Keys: a lock key's Redis names, all in one hash slot, are described in names.cjs; a
 * key held with permits (`limit`, `weight`, `mode`) in permit-scripts.cjs.
 */

const { randomBytes } = require('node:crypto');
const { describe, checkOptionNames } = require('../../common/describe.cjs');
const { checkString, checkTtl, checkListener, carriedToken, checkHandOff, checkOptionsObject } = require('../shared/checks.cjs');
const { acquireOptions } = require('../shared/permits.cjs');
const { adapterFor, isNoScript, noop } = require('./adapters.cjs');
const { ACQUIRE, RENEW, RELEASE, WAKE, DEQUEUE } = require('./scripts.cjs');
const { PERMIT_ACQUIRE } = require('./permit-scripts.cjs');
const { encodeKey, keysOfLease, lastKeyNames, toToken, toFlag, parseGrant } = require('./names.cjs');
const { QueuedOwners } = require('./grants.cjs');
const { Turns } = require('./turns.cjs');
const { RedisSubscriptions } = require('./subscriptions.cjs');
const { replicaSettings, ReplicaAcknowledgement } = require('./replicas.cjs');
const { redisInspector } = require('./inspect.cjs');
const { checkListOptions } = require('../../common/list-options.cjs');

/**
 * A process's turn on a contended key: a release hands the key to the first queued
 * owner once it has waited this long and the releasing store has had the key this long;
 * before that, the key is left free for whoever asks first (usually the process that
 * just released it).
 */
const DEFAULT_HAND_OFF_MS = 10;

class RedisLockStore {
  /** @type {ReturnType<typeof adapterFor>} */ #redis;
  #prefix;
  // Release announcements and grants: the subscriber connection (subscriptions.cjs).
  #subscriptions;
  #closed = false;
  // The store's own channel for grants, and the owners it queued (grants.cjs).
  #grantChannel;
  #owners = new QueuedOwners();
  // Leases released with owners queued, to hand over unless taken again (turns.cjs).
  #turns = new Turns((lease, closing) => {
    const args = [this.#checkHeard];
    // Closing: sent as EVAL, in one command: the caller may close its client next, and
    // EVALSHA's retry after a NOSCRIPT (a server that has not run WAKE yet) would come too late.
    (closing ? this.#evalNow(WAKE, keysOfLease(lease), args) : this.#run(WAKE, keysOfLease(lease), args)).catch(noop);
  });
  #handOffMs;
  #handOffTurn;
  #checkHeard;
  // RELEASE's settings (see there), without and with this store's grant channel.
  #releaseSettings;
  #releaseSettingsListening;
  #releaseSettingsAtOnce;
  // `key`'s Redis names, kept for the last key (names.cjs, `lastKeyNames`).
  #names;
  // With `minReplicas`: which writes wait for replicas (replicas.cjs); else undefined.
  #replicas;
  #inspector;

  /**
   * @param {{ client: object, prefix?: string, handOffAfter?: number, minReplicas?: number, replicaTimeout?: number }} options
   */
  constructor(options) {
    checkOptionsObject(options, 'a client');
    checkOptionNames(options, ['client', 'prefix', 'handOffAfter', 'minReplicas', 'replicaTimeout'], 'RedisLockStore');
    const { client, prefix = 'lock', handOffAfter = DEFAULT_HAND_OFF_MS } = options;
    const redis = adapterFor(client);
    if (redis === undefined) {
      throw new TypeError(
        `client must be an ioredis client (evalsha, eval) or a node-redis client (evalSha, eval), got ${describe(client)}`,
      );
    }
    checkString('prefix', prefix);
    if (/[{}]/.test(prefix)) {
      throw new TypeError(`prefix must not contain '{' or '}' (they would break the Redis Cluster hash tag), got ${describe(prefix)}`);
    }
    checkHandOff(handOffAfter);
    const replicas = replicaSettings(options);
    if (replicas !== undefined) this.#replicas = new ReplicaAcknowledgement(redis, replicas);
    this.#redis = redis;
    this.#prefix = prefix;
    this.#names = lastKeyNames(prefix, redis.keyPrefix);
    this.#handOffMs = String(handOffAfter);
    this.#handOffTurn = handOffAfter;
    // Redis Cluster counts a PUBLISH's subscribers on one node only.
    this.#checkHeard = redis.isCluster ? '0' : '1';
    this.#grantChannel = `${prefix}:grants:${randomBytes(12).toString('hex')}`;
    this.#releaseSettings = `${this.#handOffMs} ${this.#checkHeard} `;
    this.#releaseSettingsListening = `${this.#releaseSettings}${this.#grantChannel}`;
    // No hand-off time: the turn's channel is not read.
    this.#releaseSettingsAtOnce = `0 ${this.#checkHeard} `;
    this.#subscriptions = new RedisSubscriptions(redis, this.#grantChannel, {
      onGrant: (message) => this.#onGrant(message),
      onChannelIdle: (channel) => this.#leaveQueue(channel),
      onDropped: () => this.#leaveQueues(),
    });
    this.#inspector = redisInspector({
      client,
      prefix,
      keyPrefix: redis.keyPrefix,
      run: (s, keys, args) => this.#run(s, keys, args),
      keysOf: (key) => this.#keys(key),
      encodeKey,
    });
  }

  /** The holder of `key` and its queued waiters, undefined when none (inspect.cjs). */
  async inspect(key) {
    checkString('key', key);
    return this.#inspector.inspect(key);
  }

  /** The keys held, by SCAN: at most `limit`, starting with `prefix` (inspect.cjs). */
  list(options) {
    return this.#inspector.list(checkListOptions(options));
  }

  /** The key prefix in use. */
  get prefix() {
    return this.#prefix;
  }

  #leaseKey(key) {
    return this.#names(key).lease;
  }

  /** The Redis names of `key`'s lease, token, queue and waiters, in script order. */
  #keys(key) {
    return this.#names(key).keys;
  }

  #channel(key) {
    return this.#names(key).channel;
  }

  /** Sends `s` with its source, in one command (a client that throws rejects instead). */
  async #evalNow(s, keys, args) {
    return this.#redis.eval(s.source, keys, args);
  }

  async #run(s, keys, args) {
    try {
      return await this.#redis.evalsha(s.sha, keys, args);
    } catch (err) {
      return this.#retried(err, s, keys, args);
    }
  }

  /** `s` again with its source after EVALSHA failed with `err`, when that was NOSCRIPT. */
  #retried(err, s, keys, args) {
    if (!isNoScript(err)) throw err;
    return this.#redis.eval(s.source, keys, args);
  }

  /** Keeps permits: `limit`, `weight` and `mode` (permit-scripts.cjs). */
  get permits() {
    return true;
  }

  /**
   * Takes the lease on `key` for `ttlMs` if no live lease exists, or with options
   * `{ limit, weight }` `weight` of the key's `limit` permits if they fit and nobody is
   * queued ahead. Resolves to `{ fencingToken }`, `undefined` when the key is held (by
   * anyone, this owner included: locks are not reentrant), or `{ limit }` when the key is
   * held or waited for with another limit (a plain lease is limit 1). Rejects with the
   * client's error when Redis fails.
   */
  async acquire(key, owner, ttlMs, options) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    // Queued only once this store listens on its grant channel (from the first
    // `subscribe`, that is, from the first time the engine waits through it): a grant
    // is never published to a channel nobody listens on yet, and a store that never
    // waits opens no subscriber connection. Until then a waiter is woken by the release
    // announcement, and its next try queues it.
    // Options come from an engine on a store that grants on release: it is told of a
    // lease already handed to the owner, and, when the try will wait, asks to queue.
    const waits = options !== undefined;
    const asked = acquireOptions(options);
    // Permits queue from the first try, so that no later try overtakes it (FIFO): its
    // engine subscribes as the answer comes. A grant that beats that subscription is
    // taken back (standalone) or found by the owner's next try (Cluster).
    const listening = this.#subscriptions.grantsListening || (asked.limit !== undefined && this.#redis.canSubscribe);
    const queue = asked.queue && listening && !this.#closed && this.#replicas === undefined;
    // Taking the key again, just after releasing it: no need to wake a queued owner, and
    // one released without a turn gets its turns back.
    if (this.#turns.watching) this.#turns.retaken(this.#leaseKey(key));
    // When the try was sent: read only for an engine's try that may wait (queued or answered).
    const sentAt = waits ? performance.now() : 0;
    let s = ACQUIRE;
    let args;
    if (asked.limit !== undefined) {
      s = PERMIT_ACQUIRE;
      args = [owner, String(ttlMs), '1', String(asked.limit), String(asked.weight), queue ? this.#grantChannel : '', this.#checkHeard];
    } else if (queue) args = [owner, String(ttlMs), waits ? '1' : '0', this.#grantChannel, this.#handOffMs];
    else args = [owner, String(ttlMs), waits ? '1' : '0'];
    const subscriber = this.#subscriptions.connection;
    let reply;
    // #run inlined (and in `release`): one async function less per call, a promise and its jobs.
    try {
      reply = queue ? await this.#queueingTry(s, key, owner, args) : await this.#redis.evalsha(s.sha, this.#keys(key), args);
    } catch (err) {
      if (queue) throw err;
      reply = await this.#retried(err, s, this.#keys(key), args);
    }
    // Minus the key's limit: it is held or waited for with another (permit-scripts.cjs).
    if (reply != null && Number(reply) < 0) return { limit: -Number(reply) };
    if (reply == null) {
      if (!queue) {
        // A waiting try that does not queue (the last at its deadline) left the queue.
        if (waits && this.#owners.queued.size > 0) this.#owners.forgetQueued(owner);
        return undefined;
      }
      // Queued for the subscriber connection this try was sent with: if that one is gone
      // (dropped, or the store closed) meanwhile, no grant can reach the owner.
      if ((subscriber === null || subscriber === this.#subscriptions.connection) && !this.#closed) this.#owners.rememberQueued(owner, key, this.#channel(key), sentAt);
      else this.#evalNow(DEQUEUE, this.#keys(key).slice(2), [owner]).catch(noop);
      return undefined;
    }
    const fencingToken = toToken(reply);
    if (this.#replicas !== undefined) {
      const undo = () => this.#run(RELEASE, this.#keys(key), this.#releaseArgs(owner, true));
      await this.#replicas.granted(this.#leaseKey(key), owner, fencingToken, key, undo, asked.limit === undefined ? undefined : this.#keys(key)[1]);
    }
    // Only an owner this store queued can have been handed the lease by a release.
    if (waits && this.#owners.forgetQueued(owner) !== undefined) this.#owners.rememberAnswered(owner, fencingToken, sentAt);
    return { fencingToken };
  }

  /**
   * ACQUIRE for a try that may queue its owner. The grant of a release can reach this
   * store (on the subscriber connection) before the try's answer; `#onGrant` then keeps
   * it, and a "held" answer becomes the kept grant's token: the engine counts the lease
   * from when this try was sent, which is before the grant. A lease in the answer is
   * that same grant, found by a try that ran after it. A try that fails releases the
   * kept grant, as one nobody claims is released.
   */
  async #queueingTry(s, key, owner, args) {
    const lease = this.#leaseKey(key);
    const { tries, kept } = this.#owners;
    tries.set(owner, lease);
    let reply;
    try {
      reply = await this.#run(s, this.#keys(key), args);
    } catch (err) {
      tries.delete(owner);
      if (kept.delete(owner)) this.#releaseUnclaimed(lease, owner);
      throw err;
    }
    tries.delete(owner);
    const grant = kept.get(owner);
    if (grant === undefined) return reply;
    kept.delete(owner);
    return reply ?? grant;
  }

  /**
   * Resets the lease to `ttlMs` from now if it is `owner`'s; `false` when it is not.
   * `{ fencingToken }`: the key's next grant will be larger than it (see `localHandoff`).
   */
  async renew(key, owner, ttlMs, options) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    const carried = carriedToken(options);
    let renewed;
    if (carried === undefined) renewed = toFlag(await this.#run(RENEW, [this.#leaseKey(key)], [owner, String(ttlMs)]), 'renew');
    else {
      const keys = this.#keys(key);
      renewed = toFlag(await this.#run(RENEW, [keys[0], keys[1]], [owner, String(ttlMs), carried]), 'renew');
    }
    if (this.#replicas !== undefined) await this.#replicas.renewed(this.#leaseKey(key), owner, key, renewed);
    return renewed;
  }

  /**
   * This store hands leases over between one engine's executions (README, "What happens
   * when"): a process keeps a key for at most this turn, `handOffAfter` ms, while
   * others wait. A renew or release that carries `{ fencingToken }` makes the key's
   * next grant larger than it, and grants are never below the server's clock in
   * microseconds (ACQUIRE in lib/stores/redis/scripts.cjs).
   */
  get localHandoff() {
    return this.#handOffTurn;
  }

  /**
   * Deletes the lease if it is `owner`'s live lease, and announces the release to
   * `subscribe` listeners. `false` when the lease had lapsed or belongs to someone else
   * (it is then left alone); an owner queued for it leaves the queue (a waiter that gave up).
   */
  async release(key, owner, options) {
    checkString('key', key);
    checkString('owner', owner);
    const carried = carriedToken(options);
    if (this.#owners.answered.size > 0) this.#owners.answered.delete(owner);
    // A waiter that gave up is released: RELEASE takes it out of the queue.
    if (this.#owners.queued.size > 0) this.#owners.forgetQueued(owner);
    const lease = this.#leaseKey(key);
    const atOnce = this.#turns.atOnce(lease);
    const args = this.#releaseArgs(owner, atOnce, carried);
    let reply;
    try {
      reply = await this.#redis.evalsha(RELEASE.sha, this.#keys(key), args);
    } catch (err) {
      reply = await this.#retried(err, RELEASE, this.#keys(key), args);
    }
    if (this.#replicas !== undefined) await this.#replicas.released(this.#keys(key)[1], owner, key, carried);
    if (atOnce) this.#turns.releasedAtOnce(lease); // still a key this store lets go
    if (Number(reply) === 2) {
      // Released with owners queued, none for the hand-off time yet (turns.cjs).
      this.#turns.wakeLater(lease);
      return true;
    }
    return toFlag(reply, 'release');
  }

  /** RELEASE's arguments for `owner` (`atOnce`: no turn; `carried`: the holder's token as text). */
  #releaseArgs(owner, atOnce = false, carried = undefined) {
    let settings = this.#releaseSettingsAtOnce;
    if (!atOnce) settings = this.#subscriptions.grantsListening ? this.#releaseSettingsListening : this.#releaseSettings;
    return carried === undefined ? [owner, settings] : [owner, settings, carried];
  }

  /**
   * True: waiters queued through this store (`acquire(..., { queue: true })`) are
   * handed the lease by the holder's release, and told through `subscribe`. False
   * once closed, with `minReplicas` (a grant must be acknowledged on the connection that
   * wrote it, which a release's grant to another process is not: waiters are woken
   * instead), or when the client cannot open a subscriber connection.
   */
  get grantsOnRelease() {
    return !this.#closed && this.#redis.canSubscribe && this.#replicas === undefined;
  }

  /** Whether a live lease exists on `key` (advisory). */
  async isLocked(key) {
    checkString('key', key);
    return Number(await this.#redis.pttl(this.#leaseKey(key))) !== -2;
  }

  /** Milliseconds left on the live lease on `key`, `undefined` when free (advisory). */
  async ttl(key) {
    checkString('key', key);
    const ms = Number(await this.#redis.pttl(this.#leaseKey(key)));
    if (ms === -2) return undefined;
    if (ms === -1) return Infinity; // a lease without expiry: not written by this store
    return ms;
  }

  /**
   * Calls `onReleased()` when a lease on `key` is released to nobody through any
   * RedisLockStore that uses the same Redis names (names.cjs), and
   * `onReleased(grant)` (`{ owner, fencingToken, age }`) when a release handed it to an
   * owner this store queued: the listener returns true to claim it; a grant no listener
   * claims is released. Returns a function that removes the listener (idempotent).
   *
   * Best effort: the subscription becomes active a round trip after this returns, and
   * a message can be lost (reconnects, a subscriber connection that cannot be opened);
   * callers keep polling with a backoff and treat the call as a hint to retry early.
   * Expiry is not announced. One subscriber connection (`client.duplicate()`) is
   * opened per store on first use and closed by `close()` or with the client
   * (subscriptions.cjs); it keeps the process alive only while someone waits. Channels
   * are reference counted. Never throws for Redis reasons and never lets a subscriber
   * error crash the process; a listener that throws is ignored. Throws TypeError for bad
   * arguments. After `close()` it returns a no-op.
   */
  subscribe(key, onReleased) {
    checkString('key', key);
    checkListener(onReleased);
    if (this.#closed || !this.#redis.canSubscribe) return noop;
    return this.#subscriptions.add(this.#channel(key), onReleased);
  }

  /**
   * A release handed a lease to an owner queued through this store. The grant goes to
   * the key's listeners until one claims it; one that nobody claims (its waiter gave
   * up) is released at once, so that it passes on to the next waiter instead of
   * blocking the key for a ttl.
   */
  #onGrant(message) {
    const grant = parseGrant(message);
    if (grant === undefined) return;
    const { fencingToken, owner, name } = grant;
    // The message names the lease as Redis stores it, with the client's key prefix (the
    // waiters entry it was granted from was written through this client): the store's
    // own name for it is without, as the client adds the prefix to the keys it sends.
    const channel = `${name}:released`;
    const lease = name.slice(this.#redis.keyPrefix.length);
    const queued = this.#owners.queued.get(owner);
    // The grant came after the try that queued the owner reached Redis, so no earlier
    // than that try was sent: on this process's clock alone, at most this long ago. An
    // owner this store does not know (the message overtook the answer to the try that
    // queued it, or it was answered with the lease already) has no age: its engine
    // counts from its try in flight, or asks again.
    let age;
    if (queued !== undefined && this.#leaseKey(queued.key) === lease) {
      this.#owners.forgetQueued(owner);
      age = Math.max(0, performance.now() - queued.sentAt);
    }
    // Claimed by a waiter, or by the holder of this very lease (a duplicate). A grant
    // nobody claims (its waiter gave up) is released, so that it passes on to the next
    // waiter instead of blocking the key for a ttl; but not one that this store's answer
    // to the owner's own try has handed over already (the try found the lease granted
    // and answered with it, before this message came): its holder runs under it.
    const handedOver = this.#owners.answered.get(owner)?.fencingToken === fencingToken;
    if (this.#subscriptions.listeners.offer(channel, { owner, fencingToken, age }) || handedOver) return;
    // Nor one that overtook the answer to the try that queued its owner: the engine
    // listens on the key only once a try has answered "held", so no listener was there
    // to claim it. The try answers with it (see #queueingTry).
    if (this.#owners.tries.get(owner) === lease) {
      this.#owners.kept.set(owner, fencingToken);
      return;
    }
    this.#releaseUnclaimed(lease, owner);
  }

  /**
   * Releases a lease granted to `owner` that no waiter takes, so that it passes on: to
   * the first queued owner at once, whatever it has waited (nobody here wants a turn).
   */
  #releaseUnclaimed(lease, owner) {
    this.#run(RELEASE, keysOfLease(lease), this.#releaseArgs(owner, true)).catch(noop);
  }

  /**
   * Nobody waits through this store on the key of `channel` any more (its waiters gave
   * up): the owners it queued for that key leave the Redis queue, so that the next
   * release frees the key or hands it to a waiter that still waits, not to one that is
   * gone. Sent as EVAL, in one command, ahead of anything sent next on this client (a
   * release of the key included).
   */
  #leaveQueue(channel) {
    if (this.#owners.queuedOn.size === 0) return;
    for (const { owner, key } of this.#owners.takeQueuedOn(channel)) {
      this.#evalNow(DEQUEUE, this.#keys(key).slice(2), [owner]).catch(noop);
    }
  }

  /**
   * Owners queued through this store leave the queues: no grant can reach them now.
   * Best effort, not awaited: the server may be gone. Sent as EVAL, for the reason
   * `#turns`' wakes on closing give.
   */
  #leaveQueues() {
    for (const { owner, key } of this.#owners.takeAll()) this.#evalNow(DEQUEUE, this.#keys(key).slice(2), [owner]).catch(noop);
  }

  /**
   * Closes the subscriber connection this store opened, if any, and drops every
   * listener. The client passed in is left open: it belongs to the caller. The store
   * still acquires, renews and releases afterwards; `subscribe` becomes a no-op.
   */
  async close() {
    this.#closed = true;
    this.#leaveQueues();
    // Keys released to queued owners that were left for this store to take again
    // (turns.cjs): woken now, while the caller's client is still open. The wake waits
    // for the event loop's next turn, and a process on its way out closes its client
    // before that: the key would stay free, its queued owners waiting for a poll.
    this.#turns.wakeNow(true);
    this.#owners.answered.clear();
    await this.#subscriptions.close();
  }
}

// The scripts' sources, for diagnostics (bench/profile/redis-layers.mjs); not an API.
Object.defineProperty(RedisLockStore, Symbol.for('leasehold.redis.scripts'), {
  value: Object.freeze({ ACQUIRE: ACQUIRE.source, RENEW: RENEW.source, RELEASE: RELEASE.source, WAKE: WAKE.source }),
});

module.exports = { RedisLockStore };
