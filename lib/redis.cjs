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
 *   replicas hold them (WAIT, lib/redis-replicas.cjs); grants on release are off then.
 *   Failover, Sentinel and Cluster replicas: docs/failover.md.
 *
 * - Grant on release: an `acquire` that asks to be queued (`{ queue: true }`, as the
 *   engine does) and finds the key held puts its owner at the end of the key's queue.
 *   The holder's `release` then hands the lease straight to the first queued owner
 *   still waiting (a new lease and a new token, in the same script) and tells that
 *   owner's store on the store's own channel; the store passes the grant to its
 *   `subscribe` listener. So a handover costs the release and one message: no retry,
 *   no crowd of waiters woken to race for the key, and waiters are served in order.
 *
 * Keys. A lock key `k` uses these Redis names, all in one hash slot:
 *   lease  `${prefix}:{${enc(k)}}`           value: the owner, expiry: the lease
 *   token  `${prefix}:{${enc(k)}}:token`     the last fencing token issued for `k`
 *   queue  `${prefix}:{${enc(k)}}:queue`     owners waiting for `k`, in arrival order
 *   waiters `${prefix}:{${enc(k)}}:waiters`  owner -> "<valid until> <ttl> <queued since> <channel>"
 *   channel `${prefix}:{${enc(k)}}:released` published when the lease is released and
 *                                            nobody queued takes it over
 * and each store has a channel of its own, `${prefix}:grants:<random id>`, for grants.
 * An ioredis client's `keyPrefix` comes first in each of a key's names, its channel
 * included: a store with prefix `p` on a client with keyPrefix `app:` shares leases,
 * queues and announcements with a store with prefix `app:p` on a client without one.
 * The grant channel goes to the scripts as an argument, not a key, so it is used as it
 * is, without the keyPrefix.
 * Redis Cluster hashes only the text between the first `{` and the next `}`. The prefix
 * may not contain braces, and `enc` percent-encodes `%`, `{` and `}` (as `%25`, `%7B`,
 * `%7D`), so the user's text can never close the tag early nor open it elsewhere, and
 * distinct keys never share a name ('a}', 'a', '{a}' become `{a%7D}`, `{a}`, `{%7Ba%7D}`).
 * Lone UTF-16 surrogates, which every client would send as the same U+FFFD bytes, are
 * encoded as `%uD800`-style escapes, so `enc` is injective on all JS strings. Everything
 * else (spaces, newlines, `*`, emoji, any Unicode) is kept as is: Redis names are binary
 * safe, and the names stay readable in `redis-cli`.
 */

const { randomBytes } = require('node:crypto');
const { ReleaseListeners } = require('./release-listeners.cjs');
const { describe, checkOptionNames, carriedToken } = require('./describe.cjs');
const { adapterFor, isNoScript, noop } = require('./redis-adapters.cjs');
const { ACQUIRE, RENEW, RELEASE, WAKE, DEQUEUE } = require('./redis-scripts.cjs');
const { replicaSettings, awaitReplicas, within } = require('./redis-replicas.cjs');

/** Queued owners a store remembers before it forgets those silent for FORGET_QUEUED_MS. */
const MAX_QUEUED = 4096;

/**
 * A process's turn on a contended key: a release hands the key to the first queued
 * owner once it has waited this long and the releasing store has had the key this long;
 * before that, the key is left free for whoever asks first (usually the process that
 * just released it).
 */
const DEFAULT_HAND_OFF_MS = 10;

const nextTurn = typeof setImmediate === 'function' ? setImmediate : (fn) => setTimeout(fn, 0);

/**
 * How many leases a store remembers as left (see `#leftLeases`): the keys it released
 * to queued owners most recently, not every key it ever used.
 */
const LEFT_LEASES_MAX = 1_024;

/** How long a key's channel stays subscribed after its last listener left. */
const LINGER_MS = 1_000;
const FORGET_QUEUED_MS = 60_000;

// ---------------------------------------------------------------------------------
// Names and argument checks
// ---------------------------------------------------------------------------------

const ESCAPED = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function escapeChar(ch) {
  if (ch === '%') return '%25';
  if (ch === '{') return '%7B';
  if (ch === '}') return '%7D';
  return `%u${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The hash-tag body for a lock key: injective, and free of `{` and `}`. */
function encodeKey(key) {
  return key.replace(ESCAPED, escapeChar);
}

function checkString(name, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
}

function checkTtl(value) {
  if (typeof value !== 'number') {
    throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`ttlMs must be a positive integer number of milliseconds, got ${describe(value)}`);
  }
}

/** `acquire`'s options: `{ queue: true }` asks to be queued when the key is held. */
function queueOption(options) {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object' || (options.queue !== undefined && typeof options.queue !== 'boolean')) {
    throw new TypeError(`options must be an object like { queue: true }, got ${describe(options)}`);
  }
  return options.queue === true;
}

function toToken(reply) {
  const n = typeof reply === 'number' ? reply : Number(reply);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new Error(`RedisLockStore: unexpected reply from the acquire script: ${describe(reply)}`);
  }
  return n;
}

function toFlag(reply, method) {
  const n = Number(reply);
  if (n === 1) return true;
  if (n === 0) return false;
  throw new Error(`RedisLockStore: unexpected reply from the ${method} script: ${describe(reply)}`);
}

// ---------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------

class RedisLockStore {
  /** @type {ReturnType<typeof adapterFor>} */ #redis;
  #prefix;
  // Release announcements: listeners per channel; one subscriber connection per
  // store, opened on the first subscribe.
  #listeners = new ReleaseListeners((channel) => this.#changedChannel(channel));
  #subscriber = null;
  #subscribed = new Set();
  // Channels that gained their first listener or lost their last since the last pass
  // (and channels whose SUBSCRIBE failed, for the pass after a reconnect): a pass looks
  // at these, not at every channel.
  #changed = new Set();
  #syncing = false;
  #dirty = false;
  #closed = false;
  // Grants: this store's own channel, subscribed from its first queueing acquire until
  // close(), and the owners it has queued: owner -> { key, channel, sentAt
  // (performance.now() when the last acquire that queued it was sent) }, oldest try
  // first; and the same owners by their key's release channel.
  #grantChannel;
  #queued = new Map();
  #queuedOn = new Map();
  // Queued owners this store then answered with a lease: owner -> { fencingToken,
  // sentAt }, oldest first. A grant can reach this store after its owner's try found
  // the lease already handed to it and was answered with it; the engine then holds the
  // lease and no longer listens for it: no release then.
  #answered = new Map();
  // Tries that may queue their owner, still unanswered: owner -> lease name; and the
  // grants that reached this store before such a try's answer, unclaimed: owner ->
  // fencing token (see #queueingTry).
  #queueingTries = new Map();
  #keptGrants = new Map();
  #grantsWanted = false;
  #grantsListening = false;
  // Subscribed channels left without listeners: since when (performance.now()), oldest
  // first, and the timer that unsubscribes them once they have lingered.
  #idleSince = new Map();
  // Leases released with owners queued, to hand over unless taken again (#wakeLease).
  #wakes = new Set();
  // Leases this store released with owners queued and then did not take again (a WAKE
  // handed them over): their next release hands the key to the first queued owner at
  // once, as with handOffAfter 0, instead of leaving it free for a re-take that does
  // not come (code that does other work between its executions). Oldest first, at most
  // LEFT_LEASES_MAX. A lease is forgotten here when this store takes it again right
  // after such a release (`#releasedAtOnce` holds those until the event loop's next
  // turn): a loop of executions gets its turns back.
  #leftLeases = new Set();
  #releasedAtOnce = new Set();
  // One callback at the event loop's next turn serves both (#atTurnEnd).
  #turnEndScheduled = false;
  #handOffMs;
  #handOffTurn;
  #checkHeard;
  // RELEASE's settings (see there), without and with this store's grant channel.
  #releaseSettings;
  #releaseSettingsListening;
  #releaseSettingsAtOnce;
  #lingerTimer = undefined;
  // Stops watching the caller's client for its end (#clientEnded), while the subscriber
  // connection is open; and whether that connection may keep the process alive.
  #unwatchClient = noop;
  #keepingAlive = false;
  // The names of the last key used (`#names`): a loop of executions uses one key.
  #lastKey = undefined;
  #lastNames = undefined;
  // `minReplicas` and `replicaTimeout` (lib/redis-replicas.cjs), or undefined; and,
  // with them, the token each live lease of this store was granted with: owner ->
  // token (a release carrying no larger token raised no floor, and waits for nothing).
  #replicas;
  #grantedTokens = new Map();

  /**
   * @param {{ client: object, prefix?: string, handOffAfter?: number, minReplicas?: number, replicaTimeout?: number }} options
   */
  constructor(options) {
    if (options == null || typeof options !== 'object') {
      throw new TypeError(`options must be an object with a client, got ${describe(options)}`);
    }
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
    if (typeof handOffAfter !== 'number' || !Number.isSafeInteger(handOffAfter) || handOffAfter < 0) {
      throw new RangeError(`handOffAfter must be a non-negative integer number of milliseconds, got ${describe(handOffAfter)}`);
    }
    this.#replicas = replicaSettings(options);
    this.#redis = redis;
    this.#prefix = prefix;
    this.#handOffMs = String(handOffAfter);
    this.#handOffTurn = handOffAfter;
    // Redis Cluster counts a PUBLISH's subscribers on one node only.
    this.#checkHeard = redis.isCluster ? '0' : '1';
    this.#grantChannel = `${prefix}:grants:${randomBytes(12).toString('hex')}`;
    this.#releaseSettings = `${this.#handOffMs} ${this.#checkHeard} `;
    this.#releaseSettingsListening = `${this.#releaseSettings}${this.#grantChannel}`;
    // No hand-off time: the turn's channel is not read.
    this.#releaseSettingsAtOnce = `0 ${this.#checkHeard} `;
  }

  /** The key prefix in use. */
  get prefix() {
    return this.#prefix;
  }

  /**
   * `key`'s Redis names: `lease`, `keys` (lease, token, queue, waiters, in script
   * order; never changed by whoever receives them) and `channel` (its releases). Kept
   * for the last key.
   */
  #names(key) {
    if (key === this.#lastKey) return this.#lastNames;
    const lease = `${this.#prefix}:{${encodeKey(key)}}`;
    // Releases are announced on the script's KEYS[1] + ':released', and the client adds
    // its keyPrefix to KEYS but not to the channels it subscribes.
    const channel = `${this.#redis.keyPrefix}${lease}:released`;
    const names = { lease, keys: Object.freeze(this.#keysOfLease(lease)), channel };
    this.#lastKey = key;
    this.#lastNames = names;
    return names;
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
      if (!isNoScript(err)) throw err;
      return await this.#redis.eval(s.source, keys, args);
    }
  }

  /**
   * Takes the lease on `key` for `ttlMs` if no live lease exists. Resolves to the new
   * fencing token, or `undefined` when the key is held (by anyone, this owner included:
   * locks are not reentrant). Rejects with the client's error when Redis fails.
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
    const queue = queueOption(options) && this.#grantsListening && !this.#closed && this.#replicas === undefined;
    // Taking the key again, just after releasing it: no need to wake a queued owner, and
    // one released without a turn gets its turns back.
    if (this.#wakes.size > 0 || this.#releasedAtOnce.size > 0) {
      const lease = this.#leaseKey(key);
      this.#wakes.delete(lease);
      if (this.#releasedAtOnce.delete(lease)) this.#leftLeases.delete(lease);
    }
    const sentAt = performance.now();
    const args = queue
      ? [owner, String(ttlMs), waits ? '1' : '0', this.#grantChannel, this.#handOffMs]
      : [owner, String(ttlMs), waits ? '1' : '0'];
    const subscriber = this.#subscriber;
    const reply = queue ? await this.#queueingTry(key, owner, args) : await this.#run(ACQUIRE, this.#keys(key), args);
    if (reply == null) {
      if (!queue) {
        // A waiting try that does not queue (the last at its deadline) left the queue.
        if (waits && this.#queued.size > 0) this.#forgetQueued(owner);
        return undefined;
      }
      // Queued for the subscriber connection this try was sent with: if that one is gone
      // (dropped, or the store closed) meanwhile, no grant can reach the owner.
      if (subscriber === this.#subscriber && !this.#closed) this.#rememberQueued(owner, key, sentAt);
      else this.#evalNow(DEQUEUE, this.#keys(key).slice(2), [owner]).catch(noop);
      return undefined;
    }
    const fencingToken = toToken(reply);
    if (this.#replicas !== undefined) {
      await this.#acknowledgedGrant(key, owner);
      this.#grantedTokens.set(owner, fencingToken);
      // Leases never released (their process lost them) are forgotten, oldest first.
      if (this.#grantedTokens.size > MAX_QUEUED) this.#grantedTokens.delete(this.#grantedTokens.keys().next().value);
    }
    // Only an owner this store queued can have been handed the lease by a release.
    if (waits && this.#forgetQueued(owner) !== undefined) this.#remember(this.#answered, owner, { fencingToken, sentAt });
    return { fencingToken };
  }

  /**
   * `minReplicas` replicas hold the lease just granted to `owner`; if they do not in
   * time (or WAIT fails), the lease is released again, bounded by `replicaTimeout` (the
   * primary may be gone: the lease then went with it, or expires), and the error thrown.
   */
  async #acknowledgedGrant(key, owner) {
    try {
      await awaitReplicas(this.#redis, this.#leaseKey(key), this.#replicas, `the lease on ${describe(key)}`);
    } catch (err) {
      const undo = this.#run(RELEASE, this.#keys(key), this.#releaseArgs(owner, true)).catch(noop);
      await within(undo, this.#replicas.timeoutMs);
      throw err;
    }
  }

  /**
   * ACQUIRE for a try that may queue its owner. The grant of a release can reach this
   * store (on the subscriber connection) before the try's answer; `#onGrant` then keeps
   * it, and a "held" answer becomes the kept grant's token: the engine counts the lease
   * from when this try was sent, which is before the grant. A lease in the answer is
   * that same grant, found by a try that ran after it. A try that fails releases the
   * kept grant, as one nobody claims is released.
   */
  async #queueingTry(key, owner, args) {
    const lease = this.#leaseKey(key);
    this.#queueingTries.set(owner, lease);
    let reply;
    try {
      reply = await this.#run(ACQUIRE, this.#keys(key), args);
    } catch (err) {
      this.#queueingTries.delete(owner);
      if (this.#keptGrants.delete(owner)) this.#releaseUnclaimed(lease, owner);
      throw err;
    }
    this.#queueingTries.delete(owner);
    const kept = this.#keptGrants.get(owner);
    if (kept === undefined) return reply;
    this.#keptGrants.delete(owner);
    return reply ?? kept;
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
    // A renewal the replicas do not hold is a failure (retried while the lease lasts).
    if (this.#replicas !== undefined && (renewed || carried !== undefined)) {
      await awaitReplicas(this.#redis, this.#leaseKey(key), this.#replicas, `the renewal of ${describe(key)}`);
    }
    return renewed;
  }

  /**
   * This store hands leases over between one engine's executions (README, "What happens
   * when"): a process keeps a key for at most this turn, `handOffAfter` ms, while
   * others wait. A renew or release that carries `{ fencingToken }` makes the key's
   * next grant larger than it, and grants are never below the server's clock in
   * microseconds (ACQUIRE in lib/redis-scripts.cjs).
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
    if (this.#answered.size > 0) this.#answered.delete(owner);
    // A waiter that gave up is released: RELEASE takes it out of the queue.
    if (this.#queued.size > 0) this.#forgetQueued(owner);
    const lease = this.#leaseKey(key);
    const atOnce = this.#leftLeases.size > 0 && this.#leftLeases.has(lease);
    const args = this.#releaseArgs(owner, atOnce);
    const reply = await this.#run(RELEASE, this.#keys(key), carried === undefined ? args : [...args, carried]);
    // A token floor the release raised (a token handed over locally, above the grant's)
    // must outlive a failover too.
    if (this.#replicas !== undefined) {
      const granted = this.#grantedTokens.get(owner) ?? 0;
      this.#grantedTokens.delete(owner);
      if (carried !== undefined && Number(carried) > granted) {
        await awaitReplicas(this.#redis, lease, this.#replicas, `the token floor of ${describe(key)}`);
      }
    }
    if (atOnce) {
      this.#rememberLeft(lease); // still a key this store lets go
      this.#watchRetake(lease);
    }
    if (Number(reply) === 2) {
      this.#wakeLease(lease);
      return true;
    }
    return toFlag(reply, 'release');
  }

  /** RELEASE's arguments for `owner`'s lease; `atOnce`: handing over without a turn. */
  #releaseArgs(owner, atOnce = false) {
    if (atOnce) return [owner, this.#releaseSettingsAtOnce];
    return [owner, this.#grantsListening ? this.#releaseSettingsListening : this.#releaseSettings];
  }

  /** `lease` is one this store let go, most recently (see `#leftLeases`). */
  #rememberLeft(lease) {
    this.#leftLeases.delete(lease);
    this.#leftLeases.add(lease);
    if (this.#leftLeases.size > LEFT_LEASES_MAX) this.#leftLeases.delete(this.#leftLeases.values().next().value);
  }

  /**
   * `lease` was released without keeping this store's turn: if this store asks for it
   * again before the event loop's next turn, it runs executions in a loop, and its
   * releases keep turns again (see `#leftLeases`).
   */
  #watchRetake(lease) {
    this.#releasedAtOnce.add(lease);
    this.#atTurnEnd();
  }

  /**
   * At the event loop's next turn, what this turn's releases left to it: the leases
   * this store did not take again are woken (#wakeLease), and those released without a
   * turn are no longer watched (#watchRetake).
   */
  #atTurnEnd() {
    if (this.#turnEndScheduled) return;
    this.#turnEndScheduled = true;
    nextTurn(() => {
      this.#turnEndScheduled = false;
      this.#releasedAtOnce.clear();
      this.#wakeNow();
    });
  }

  /** The Redis names of a lease's key, from the lease's name, in script order. */
  #keysOfLease(lease) {
    return [lease, `${lease}:token`, `${lease}:queue`, `${lease}:waiters`];
  }

  /**
   * The lease was released while owners are queued, none of them for the hand-off time
   * yet. Code that releases a lock often takes it again at once (a loop of executions):
   * the key is left to that, as every polling lock lets it be, instead of waking another
   * process for each release. If this store does not ask for the key again before the
   * event loop's next turn, the first queued owner is handed the key (WAKE).
   */
  #wakeLease(lease) {
    this.#wakes.add(lease);
    this.#atTurnEnd();
  }

  /**
   * Runs the wakes `#wakeLease` scheduled (not awaited). `closing`: sent as EVAL, in
   * one command: the caller may close its client next, and EVALSHA's retry after a
   * NOSCRIPT (a server that has not run WAKE yet) would come too late.
   */
  #wakeNow(closing = false) {
    if (this.#wakes.size === 0) return;
    const leases = [...this.#wakes];
    this.#wakes.clear();
    for (const l of leases) {
      this.#rememberLeft(l);
      const keys = this.#keysOfLease(l);
      const args = [this.#checkHeard];
      (closing ? this.#evalNow(WAKE, keys, args) : this.#run(WAKE, keys, args)).catch(noop);
    }
  }

  /**
   * True: waiters queued through this store (`acquire(..., { queue: true })`) are
   * handed the lease by the holder's release, and told through `subscribe`. False
   * once closed, with `minReplicas`, or when the client cannot open a subscriber
   * connection.
   */
  get grantsOnRelease() {
    // With minReplicas a grant must be acknowledged by the connection that wrote it,
    // which a release's grant to another process cannot be: waiters are woken instead.
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
   * RedisLockStore that uses the same Redis names (see Keys above), and
   * `onReleased(grant)` (`{ owner, fencingToken, age }`) when a release handed it to an
   * owner this store queued: the listener returns true to claim it; a grant no listener
   * claims is released. Returns a function that removes the listener (idempotent).
   *
   * Best effort: the subscription becomes active a round trip after this returns, and
   * a message can be lost (reconnects, a subscriber connection that cannot be opened);
   * callers keep polling with a backoff and treat the call as a hint to retry early.
   * Expiry is not announced. One subscriber connection (`client.duplicate()`) is
   * opened per store on first use and closed by `close()` or with the client (see
   * `#clientEnded`); it keeps the process alive only while someone waits. Channels are
   * reference counted. Never throws for Redis reasons and never lets a subscriber error crash
   * the process; a listener that throws is ignored. Throws TypeError for bad
   * arguments. After `close()` it returns a no-op.
   */
  subscribe(key, onReleased) {
    checkString('key', key);
    if (typeof onReleased !== 'function') {
      throw new TypeError(`onReleased must be a function, got ${describe(onReleased)}`);
    }
    if (this.#closed || !this.#redis.canSubscribe) return noop;
    this.#listenForGrants();
    const unsubscribe = this.#listeners.add(this.#channel(key), onReleased);
    // The subscriber connection ended for good: this waiter opens a new one.
    if (this.#subscriber === null) this.#sync();
    return unsubscribe;
  }

  /** Subscribes the grant channel, once: kept until close(). */
  #listenForGrants() {
    if (this.#grantsWanted) return;
    this.#grantsWanted = true;
    this.#sync();
  }

  #onMessage(channel, message) {
    if (channel === this.#grantChannel) this.#onGrant(message);
    else this.#listeners.notify(channel);
  }

  /**
   * A release handed a lease to an owner queued through this store. The grant goes to
   * the key's listeners until one claims it; one that nobody claims (its waiter gave
   * up) is released at once, so that it passes on to the next waiter instead of
   * blocking the key for a ttl.
   */
  #onGrant(message) {
    const head = /^(\d+) (\d+) /.exec(message);
    if (head === null) return;
    const fencingToken = Number(head[1]);
    let rest = message.slice(head[0].length);
    // The owner's length is in bytes: cut by bytes when the text is not ASCII.
    let owner;
    let name;
    const length = Number(head[2]);
    if (Buffer.byteLength(rest) === rest.length) {
      owner = rest.slice(0, length);
      name = rest.slice(length);
    } else {
      rest = Buffer.from(rest);
      owner = rest.subarray(0, length).toString();
      name = rest.subarray(length).toString();
    }
    // The message names the lease as Redis stores it, with the client's key prefix (the
    // waiters entry it was granted from was written through this client): the store's
    // own name for it is without, as the client adds the prefix to the keys it sends.
    const channel = `${name}:released`;
    const lease = name.slice(this.#redis.keyPrefix.length);
    const queued = this.#queued.get(owner);
    // The grant came after the try that queued the owner reached Redis, so no earlier
    // than that try was sent: on this process's clock alone, at most this long ago. An
    // owner this store does not know (the message overtook the answer to the try that
    // queued it, or it was answered with the lease already) has no age: its engine
    // counts from its try in flight, or asks again.
    let age;
    if (queued !== undefined && this.#leaseKey(queued.key) === lease) {
      this.#forgetQueued(owner);
      age = Math.max(0, performance.now() - queued.sentAt);
    }
    // Claimed by a waiter, or by the holder of this very lease (a duplicate). A grant
    // nobody claims (its waiter gave up) is released, so that it passes on to the next
    // waiter instead of blocking the key for a ttl; but not one that this store's answer
    // to the owner's own try has handed over already (the try found the lease granted
    // and answered with it, before this message came): its holder runs under it.
    const handedOver = this.#answered.get(owner)?.fencingToken === fencingToken;
    if (this.#listeners.offer(channel, { owner, fencingToken, age }) || handedOver) return;
    // Nor one that overtook the answer to the try that queued its owner: the engine
    // listens on the key only once a try has answered "held", so no listener was there
    // to claim it. The try answers with it (see #queueingTry).
    if (this.#queueingTries.get(owner) === lease) {
      this.#keptGrants.set(owner, fencingToken);
      return;
    }
    this.#releaseUnclaimed(lease, owner);
  }

  /**
   * Releases a lease granted to `owner` that no waiter takes, so that it passes on: to
   * the first queued owner at once, whatever it has waited (nobody here wants a turn).
   */
  #releaseUnclaimed(lease, owner) {
    this.#run(RELEASE, this.#keysOfLease(lease), this.#releaseArgs(owner, true)).catch(noop);
  }

  /**
   * Remembers that `owner` was queued for `key` by a try sent at `sentAt`. The map is
   * kept in the order of the owners' last tries, so the oldest are first: owners that
   * have not asked for a minute (their waiters are gone) are forgotten from the front,
   * and so is the oldest beyond MAX_QUEUED.
   */
  #rememberQueued(owner, key, sentAt) {
    this.#forgetQueued(owner);
    const channel = this.#channel(key);
    let owners = this.#queuedOn.get(channel);
    if (owners === undefined) {
      owners = new Set();
      this.#queuedOn.set(channel, owners);
    }
    owners.add(owner);
    this.#queued.set(owner, { key, channel, sentAt });
    for (const [oldest, old] of this.#queued) {
      if (this.#queued.size <= MAX_QUEUED && sentAt - old.sentAt <= FORGET_QUEUED_MS) break;
      this.#forgetQueued(oldest);
    }
  }

  /** Forgets `owner` as queued through this store; its entry, if it had one. */
  #forgetQueued(owner) {
    const entry = this.#queued.get(owner);
    if (entry === undefined) return undefined;
    this.#queued.delete(owner);
    const owners = this.#queuedOn.get(entry.channel);
    if (owners !== undefined && owners.delete(owner) && owners.size === 0) this.#queuedOn.delete(entry.channel);
    return entry;
  }

  /**
   * Nobody waits through this store on the key of `channel` any more (its waiters gave
   * up): the owners it queued for that key leave the Redis queue, so that the next
   * release frees the key or hands it to a waiter that still waits, not to one that is
   * gone. Sent as EVAL, in one command, ahead of anything sent next on this client (a
   * release of the key included).
   */
  #leaveQueue(channel) {
    const owners = this.#queuedOn.get(channel);
    if (owners === undefined) return;
    for (const owner of [...owners]) {
      const { key } = this.#forgetQueued(owner);
      this.#evalNow(DEQUEUE, this.#keys(key).slice(2), [owner]).catch(noop);
    }
  }

  /** Sets `owners`' entry for `owner` last, and forgets the oldest as #rememberQueued says. */
  #remember(owners, owner, entry) {
    owners.delete(owner);
    owners.set(owner, entry);
    for (const [oldest, old] of owners) {
      if (owners.size <= MAX_QUEUED && entry.sentAt - old.sentAt <= FORGET_QUEUED_MS) break;
      owners.delete(oldest);
    }
  }

  /**
   * Closes the subscriber connection this store opened, if any, and drops every
   * listener. The client passed in is left open: it belongs to the caller. The store
   * still acquires, renews and releases afterwards; `subscribe` becomes a no-op.
   */
  async close() {
    this.#closed = true;
    this.#grantsListening = false;
    this.#listeners.clear();
    this.#leaveQueues();
    // Keys released to queued owners that were left for this store to take again (see
    // `#wakeLease`): woken now, while the caller's client is still open. The wake waits
    // for the event loop's next turn, and a process on its way out closes its client
    // before that: the key would stay free, its queued owners waiting for a poll.
    this.#wakeNow(true);
    this.#answered.clear();
    this.#idleSince.clear();
    this.#changed.clear();
    if (this.#lingerTimer !== undefined) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    this.#subscribed.clear();
    const subscriber = this.#subscriber;
    this.#subscriber = null;
    this.#unwatchClient();
    this.#unwatchClient = noop;
    if (subscriber !== null) await subscriber.close();
  }

  /**
   * Owners queued through this store leave the queues: no grant can reach them now.
   * Best effort, not awaited: the server may be gone. Sent as EVAL, for the reason
   * `#wakeNow` gives.
   */
  #leaveQueues() {
    for (const [owner, { key }] of this.#queued) this.#evalNow(DEQUEUE, this.#keys(key).slice(2), [owner]).catch(noop);
    this.#queued.clear();
    this.#queuedOn.clear();
  }

  /**
   * Forgets a subscriber connection that will not come back (its client gave up
   * reconnecting): this store stops queueing owners, and those it queued leave the
   * queues; a release wakes them no more, and they poll. The next `subscribe` (the next
   * wait) opens a new connection.
   */
  #dropSubscriber(subscriber) {
    if (subscriber !== this.#subscriber) return; // closed, or dropped already
    this.#subscriber = null;
    this.#unwatchClient();
    this.#unwatchClient = noop;
    this.#subscribed.clear();
    this.#idleSince.clear();
    this.#grantsListening = false;
    this.#leaveQueues();
    subscriber.close().catch(noop);
  }

  /**
   * The subscriber connection keeps the process alive only while someone waits through
   * this store (as the engine's timers do then): a process whose work is done exits
   * without `close()`.
   */
  #keepAliveWhileWaited() {
    const wanted = this.#listeners.size > 0;
    if (this.#subscriber === null || wanted === this.#keepingAlive) return;
    this.#keepingAlive = wanted;
    this.#subscriber.keepAlive(wanted);
  }

  /**
   * The caller's client ended (closed by its owner, or given up reconnecting): the
   * subscriber connection goes with it, and the waiters on this store try at once,
   * failing with the client's error (a LockStoreError) instead of waiting for their
   * next poll. A new connection is opened only once the client is open again.
   */
  #clientEnded() {
    if (this.#subscriber !== null) this.#dropSubscriber(this.#subscriber);
    for (const channel of this.#listeners.channels()) this.#listeners.notify(channel);
  }

  /**
   * `channel` gained its first listener or lost its last. One with no listener that is
   * not subscribed needs nothing (a SUBSCRIBE in flight for it looks again when it is
   * answered): #changed holds only channels with listeners or subscriptions, however
   * many keys come and go while a pass waits on a server that does not answer.
   */
  #changedChannel(channel) {
    if (!this.#listeners.has(channel) && this.#queuedOn.size > 0) this.#leaveQueue(channel);
    this.#keepAliveWhileWaited();
    if (this.#listeners.has(channel) || this.#subscribed.has(channel)) this.#changed.add(channel);
    else this.#changed.delete(channel);
    this.#sync();
  }

  /**
   * Brings the server-side subscriptions in line with #listeners, one pass at a time,
   * from the next microtask: every change of a turn (thousands of waiters that give up
   * together) is one pass, and a pass costs what changed, not every channel: waiters
   * on many keys that leave one at a time cost one step each (20,000 keys used to cost
   * 1.5 s of passes over all channels).
   */
  #sync() {
    this.#dirty = true;
    if (this.#syncing) return;
    this.#syncing = true;
    queueMicrotask(() => this.#syncLoop().catch(noop));
  }

  /**
   * The channels to subscribe now: those of #changed that have listeners and are not
   * subscribed (and the grant channel, once wanted). A subscribed channel whose last
   * listener left starts to linger (#idleSince).
   */
  #wanted(now) {
    const wanted = [];
    if (this.#grantsWanted && !this.#subscribed.has(this.#grantChannel)) wanted.push(this.#grantChannel);
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

  /**
   * Subscribed channels without a listener for LINGER_MS: a key that is waited for again
   * and again (a waiter leaves as it is granted, the next arrives) keeps its channel
   * instead of costing an UNSUBSCRIBE and a SUBSCRIBE each time. When some are not due
   * yet, a (non-blocking) timer comes back for them.
   */
  #unwanted(now) {
    const unwanted = [];
    let next = Infinity;
    for (const [c, since] of this.#idleSince) {
      // Waited for again since the pass began (while its SUBSCRIBEs were in flight): it
      // stays. Its change is in #changed for the next pass, which finds it subscribed.
      if (this.#listeners.has(c)) {
        this.#idleSince.delete(c);
        continue;
      }
      if (now - since < LINGER_MS) {
        next = since + LINGER_MS; // the oldest left: the others are due later
        break;
      }
      unwanted.push(c);
    }
    for (const c of unwanted) this.#idleSince.delete(c);
    if (next !== Infinity && this.#lingerTimer === undefined) {
      this.#lingerTimer = setTimeout(() => {
        this.#lingerTimer = undefined;
        this.#sync();
      }, next - now);
      this.#lingerTimer.unref?.();
    }
    return unwanted;
  }

  /**
   * The passes are over as the last one ends (#syncing is cleared there, not a microtask
   * later): a change that comes just after a pass with nothing to send (a waiter for a
   * new key, as another waiter leaves) starts a pass of its own instead of being left
   * for the next one (a linger timer's, a second later).
   */
  async #syncLoop() {
    try {
      while (this.#dirty && !this.#closed) {
        this.#dirty = false;
        if (this.#subscriber === null) {
          // Nothing to listen for; or the caller closed its client: no connection of the
          // store's own outlives it (waiters poll, and their tries fail).
          if ((this.#listeners.size === 0 && !this.#grantsWanted) || this.#redis.isEnded()) {
            this.#changed.clear();
            return;
          }
          try {
            const opened = this.#redis.openSubscriber(
              (channel, message) => this.#onMessage(channel, message),
              // (Re)connected: retry whatever failed to subscribe. Resubscribing what was
              // subscribed before a reconnect is the client's own job.
              () => this.#sync(),
              () => this.#dropSubscriber(opened),
            );
            this.#subscriber = opened;
          } catch {
            this.#changed.clear();
            return; // no subscriber: waiters poll
          }
          this.#unwatchClient = this.#redis.onEnd(() => this.#clientEnded());
          this.#keepingAlive = false; // opened without keeping the process alive
          this.#keepAliveWhileWaited();
          // A new connection: every channel with listeners is to be subscribed.
          for (const c of this.#listeners.channels()) this.#changed.add(c);
        }
        const subscriber = this.#subscriber;
        const wanted = this.#wanted(performance.now());
        if (wanted.length > 0) {
          try {
            await subscriber.subscribe(wanted);
            if (subscriber === this.#subscriber) {
              for (const c of wanted) {
                this.#subscribed.add(c);
                // Its last listener may have left meanwhile: the next pass sees to it.
                if (c !== this.#grantChannel && !this.#listeners.has(c)) this.#changedChannel(c);
              }
              if (wanted.includes(this.#grantChannel)) this.#grantsListening = true;
            }
          } catch {
            // Not connected yet, or lost: retried on the subscriber's next 'ready'. A
            // connection that will never come back is dropped, so that the next
            // subscribe opens a fresh one.
            if (subscriber === this.#subscriber && subscriber.isDead()) {
              this.#dropSubscriber(subscriber);
              return;
            }
            if (subscriber === this.#subscriber) {
              for (const c of wanted) if (c !== this.#grantChannel) this.#changed.add(c);
            }
          }
        }
        const unwanted = this.#unwanted(performance.now());
        if (unwanted.length > 0) {
          for (const c of unwanted) this.#subscribed.delete(c);
          try {
            await subscriber.unsubscribe(unwanted);
          } catch {
            // a stray subscription only costs messages that find no listener
          }
        }
      }
    } finally {
      this.#syncing = false;
    }
  }
}

// The scripts' sources, for diagnostics (bench/profile/redis-layers.mjs); not an API.
Object.defineProperty(RedisLockStore, Symbol.for('leasehold.redis.scripts'), {
  value: Object.freeze({ ACQUIRE: ACQUIRE.source, RENEW: RENEW.source, RELEASE: RELEASE.source, WAKE: WAKE.source }),
});

module.exports = { RedisLockStore };
