'use strict';
/**
 * `leasehold/etcd`: a `LockStore` on etcd (v3 API), for the `etcd3` client. Plain
 * JavaScript, no dependency: it uses the client object it is given (its connections,
 * its retries, its namespace), and never closes it.
 *
 * What it promises
 * - Leases expire on the etcd cluster (a majority agrees on every write), and the
 *   fencing token is the create revision of the holder's key: strictly increasing
 *   across the whole cluster, across release, expiry and a change of leader, with no
 *   clock involved.
 * - A lease per holder, of the lock's ttl rounded up to whole seconds (etcd leases
 *   count seconds; a server raises a TTL below its minimum, about 1.5 × its election
 *   timeout, to that minimum). The server therefore keeps a lease at least as long as
 *   the engine counts on it. `renew` is one keep-alive; `release` deletes the owner's
 *   key in a transaction that compares its value (the owner), so it deletes nothing
 *   of anyone else's.
 * - `renew` and `release` answering `false` are definitive: the owner's lease is gone.
 *   etcd and client errors reject unchanged.
 * - `isLocked` and `ttl` are advisory.
 *
 * Keys. The lock key `k` is the prefix `${prefix}/${enc(k)}/`, where `enc` writes `%`
 * and `/` as `%25` and `%2F` (so distinct keys never share a prefix). Each holder and
 * each waiter has its own key under it, `${prefix}/${enc(k)}/${lease ID in hex}`, whose
 * value is the owner and whose lease is the owner's lease (etcd's own
 * `concurrency.Mutex` layout). An `etcd3` namespace's prefix comes first.
 *
 * Waiting (as `concurrency.Mutex` does). The key under the prefix with the lowest
 * create revision holds the lock. An `acquire` that is to wait (`{ queue: true }`, as
 * the engine asks) writes its key and, when it is not the first, watches the deletion
 * of the key just before it in create-revision order: FIFO across processes, one
 * watcher per waiter (no crowd woken by a release), no polling. When that key goes,
 * the waiter is first (or looks for the next key before it, one read): the lock is
 * its, with its key's create revision as the token, and the store offers it to its
 * `subscribe` listener (the engine) as a grant. A grant nobody claims is released at
 * once, so the next waiter goes. While a key waits, the store keeps its lease alive
 * (every ttl/3); the waiters of a key nobody in this store waits for any more (the
 * engine unsubscribed it) leave the queue after LINGER_MS, and `close()` takes all of
 * this store's waiters out.
 *
 * The watches and the keep-alives go over one stream each of the client's
 * (lib/etcd-watch.cjs, lib/etcd-keepalive.cjs), opened when needed and ended once idle.
 *
 * Failover. A stream whose member goes away is replaced, and its watches resume from
 * the revision they started at. An acquire's transaction and lease grant are sent with
 * a gRPC deadline and again after a timeout or a lost member, until two thirds of the
 * ttl: a request in flight when the leader dies would otherwise wait out etcd's request
 * timeout (5 s and more). Sending the transaction twice is safe: it reads back the
 * owner's key and takes that key's create revision as the token. A waiter's keep-alives
 * (and a handed-over lease's) are sent again the same way: the client opens each new
 * stream on any of its hosts, one whose member is down too.
 *
 * Leases are reused: a released holder's lease (its key deleted) is kept for the next
 * acquire with the same ttl, which refreshes it with a keep-alive sent with its
 * transaction, instead of a revoke now and a grant then (two more writes through
 * consensus per lock). Kept leases hold no key, and lapse on their own within their
 * ttl; `close()` revokes them.
 */

const { ReleaseListeners } = require('./release-listeners.cjs');
const { describe, checkOptionNames } = require('./describe.cjs');
const { KeepAlives } = require('./etcd-keepalive.cjs');
const { DeletionWatches } = require('./etcd-watch.cjs');
const { etcdInspector } = require('./etcd-inspect.cjs');
const { checkListOptions } = require('./inspect-options.cjs');
const {
  EQUAL,
  CREATE,
  VALUE,
  DESCEND,
  BY_CREATE,
  isTransient,
  checkText,
  checkTtl,
  leaseSeconds,
  enc,
  rangeEnd,
  isEtcdClient,
  revisionOf,
  rangeOf,
  firstRange,
  lastTwoRange,
} = require('./etcd-requests.cjs');

function noop() {}

// The waiters of a key that no listener of this store waits for any more leave the
// queue this long after its last listener left (a handover within the process
// unsubscribes and subscribes again in between).
const LINGER_MS = 1_000;
// A waiter whose position has not been read for this long is read again when its
// engine asks (a safety net under the watch; the watch is what serves it).
const RECHECK_MS = 5_000;
// Kept leases per ttl, at most.
const MAX_KEPT_LEASES = 32;
// A kept lease is reused only while it has at least this long left.
const KEPT_MARGIN_MS = 500;
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

// A request retried after a timeout or a lost member (see #retried) waits this long first.
const RETRY_PAUSE_MS = 50;
// The shortest gRPC deadline a try of such a request gets.
const MIN_SLICE_MS = 250;

class EtcdLockStore {
  #kv;
  #leases;
  #keepAlives;
  #watches;
  #prefix;
  #namespace; // the client's namespace prefix (a Buffer), first in every key
  #entries = new Map(); // `${key}\0${owner}` -> entry, for this store's holders and waiters
  #kept = new Map(); // lease seconds -> kept leases
  #listeners = new ReleaseListeners((key) => this.#listenersChanged(key));
  #lingerTimers = new Map(); // key -> timer that drops its waiters
  #untilSweep = SWEEP_EVERY;
  #closed = false;
  #inspector;

  /** @param {{ client: object, prefix?: string }} options */
  constructor(options) {
    if (options == null || typeof options !== 'object') {
      throw new TypeError(`options must be an object with a client, got ${describe(options)}`);
    }
    checkOptionNames(options, ['client', 'prefix'], 'EtcdLockStore');
    const { client, prefix = 'leasehold' } = options;
    if (!isEtcdClient(client)) {
      throw new TypeError(`client must be an Etcd3 client (from the etcd3 package), got ${describe(client)}`);
    }
    checkText('prefix', prefix);
    this.#kv = client.kv;
    this.#leases = client.leaseClient;
    this.#keepAlives = new KeepAlives(client.leaseClient);
    this.#watches = new DeletionWatches(client.watchClient);
    this.#prefix = prefix;
    this.#namespace = Buffer.isBuffer(client.prefix) ? client.prefix : Buffer.alloc(0);
    this.#inspector = etcdInspector({ kv: client.kv, leases: client.leaseClient, namespace: this.#namespace, prefix });
  }

  /** The holder of `key` and its waiters in queue order, undefined when none (lib/etcd-inspect.cjs). */
  async inspect(key) {
    checkText('key', key);
    return this.#inspector.inspect(key);
  }

  /** The keys held, by range reads: at most `limit`, starting with `prefix` (lib/etcd-inspect.cjs). */
  list(options) {
    const checked = checkListOptions(options);
    if (checked.prefix !== '') checkText('prefix', checked.prefix);
    return this.#inspector.list(checked);
  }

  /** The key prefix. */
  get prefix() {
    return this.#prefix;
  }

  /** A release hands the lock to the first waiter: the engine passes `{ queue }` to `acquire`. */
  get grantsOnRelease() {
    return true;
  }

  /**
   * Takes the lock on `key` for `ttlMs`: resolves to `{ fencingToken }`, or `undefined`
   * when it is held (by anyone: locks are not reentrant). With `{ queue: true }` the
   * owner then stays in the key's queue and is granted the lock in its turn (see
   * Waiting at the top); asked again, it answers from that: `undefined` while the owner
   * waits, the lease once it was handed over (counted again from this call). Without
   * it, nothing is left behind.
   */
  async acquire(key, owner, ttlMs, options) {
    checkText('key', key);
    checkText('owner', owner);
    checkTtl(ttlMs);
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw new TypeError(`options must be an object such as { queue: true }, got ${describe(options)}`);
    }
    const queue = options?.queue === true && !this.#closed;
    const entry = this.#entries.get(`${key}\u0000${owner}`);
    if (entry !== undefined) return this.#askedAgain(entry, queue, ttlMs);

    const lease = await this.#takeLease(ttlMs);
    const prefix = this.#lockPrefix(key);
    const end = rangeEnd(prefix);
    const name = Buffer.concat([prefix, Buffer.from(BigInt(lease.id).toString(16))]);
    const put = { request_put: { key: name, value: Buffer.from(owner), lease: lease.id } };
    const sentAt = performance.now();
    // A kept lease is refreshed by a keep-alive sent with the transaction: the server
    // then keeps it at least ttl from this call, as the engine counts.
    const refreshed = lease.fresh ? undefined : this.#keepAlives.send(lease.id);
    // Awaited after the transaction: a failure meanwhile must not count as unhandled.
    refreshed?.catch(noop);
    // Its own key is read back too: a client that retried the transaction (its first
    // answer lost with a member) finds the key there from the first try, created at an
    // earlier revision than this transaction's.
    const mine = { request_range: { key: name, keys_only: true } };
    let reply;
    try {
      reply = await this.#retried(sentAt + (2 * ttlMs) / 3, () => this.#kv.txn(
        queue
          ? {
              compare: [],
              success: [put, firstRange(prefix, end), lastTwoRange(prefix, end), mine],
              failure: [],
            }
          : {
              // Only when no key is under the prefix: a try that does not wait never
              // writes ahead of the queue, nor leaves anything behind.
              compare: [{ key: prefix, range_end: end, target: CREATE, result: EQUAL, create_revision: 0 }],
              success: [put],
              failure: [firstRange(prefix, end), mine],
            },
        this.#callOptions(sentAt + (2 * ttlMs) / 3),
      ));
      if (refreshed !== undefined) {
        // The keep-alive is sent again if its stream failed (a member gone): from later
        // still, so the lease is kept at least as long.
        let again = false;
        const ttl = await this.#retried(sentAt + (2 * ttlMs) / 3, () => (again ? this.#keepAlives.send(lease.id) : ((again = true), refreshed)));
        if (ttl <= 0) throw new Error('EtcdLockStore: a kept lease lapsed');
      }
    } catch (err) {
      refreshed?.catch(noop);
      // The put may have been applied and its answer lost: the revoke takes the key too.
      this.#revoke(lease);
      throw err;
    }
    if (!lease.fresh) lease.keptAt = sentAt;
    const txnRev = revisionOf(reply, 'acquire');
    const e = {
      key,
      owner,
      ttlMs,
      lease,
      name,
      prefix,
      end,
      rev: txnRev,
      state: HELD,
      stopWatch: noop,
      timer: undefined,
      checkedAt: sentAt,
      createdAt: sentAt,
    };
    if ((this.#untilSweep -= 1) === 0) this.#sweep();
    if (!queue && reply.succeeded) {
      this.#entries.set(`${key}\u0000${owner}`, e);
      return { fencingToken: e.rev };
    }
    const [firstAt, mineAt] = queue ? [1, 3] : [0, 1];
    const own = rangeOf(reply, mineAt)[0];
    if (own === undefined) {
      this.#keep(lease); // held, and nothing of ours was written
      return undefined;
    }
    e.rev = Number(own.create_revision);
    this.#entries.set(`${key}\u0000${owner}`, e);
    const first = rangeOf(reply, firstAt)[0]?.key;
    if (first === undefined || first.equals(name)) return { fencingToken: e.rev };
    e.state = WAITING;
    this.#keepWaiting(e);
    if (!queue) {
      // A retried try that does not wait, whose first attempt was applied: it leaves.
      await this.#leave(e);
      return undefined;
    }
    if (e.rev !== txnRev) {
      this.#recheck(e); // created by an earlier attempt: who is just before it is read again
      return undefined;
    }
    // Descending by create revision: this key, then the one just before it.
    const ahead = rangeOf(reply, 2)[1]?.key;
    this.#watchAhead(e, ahead, ahead.equals(first), e.rev);
    return undefined;
  }

  /** An owner with a key here asks again (the engine's poll, or its last try). */
  async #askedAgain(e, queue, ttlMs) {
    if (e.state === WAITING) {
      if (!queue) {
        await this.#leave(e); // it will not wait any more
        return undefined;
      }
      if (performance.now() - e.checkedAt > RECHECK_MS) this.#recheck(e);
      return undefined;
    }
    // The lock is the owner's already (handed over): counted again from this try.
    const sentAt = performance.now();
    const ttl = await this.#keepAlive(e.lease, sentAt + (2 * ttlMs) / 3);
    if (ttl <= 0) {
      this.#forget(e);
      return this.acquire(e.key, e.owner, ttlMs, { queue });
    }
    e.lease.keptAt = sentAt;
    if (e.state === GRANTED) e.state = HELD;
    return { fencingToken: e.rev };
  }

  /** Resets `owner`'s lease on `key` with one keep-alive; `false` when it is gone. */
  async renew(key, owner, ttlMs) {
    checkText('key', key);
    checkText('owner', owner);
    checkTtl(ttlMs);
    const e = this.#entries.get(`${key}\u0000${owner}`);
    let lease = e?.lease;
    let name = e?.name;
    if (e === undefined) {
      const found = await this.#find(key, owner);
      if (found === undefined) return false;
      lease = { id: String(found.lease), seconds: 0, granted: 0, foreign: true, keptAt: 0 };
      name = found.key;
    }
    const sentAt = performance.now();
    const ttl = await this.#keepAlives.send(lease.id);
    if (ttl <= 0) {
      if (e !== undefined) this.#forget(e);
      return false;
    }
    lease.keptAt = sentAt;
    // A keep-alive answers the lease's whole TTL, which it keeps: a longer ttl takes a new lease.
    if (ttl * 1000 >= ttlMs) return true;
    return this.#relet(e, name, owner, lease, ttlMs);
  }

  /** Moves `owner`'s key to a new lease of `ttlMs` (its create revision, the token, stays). */
  async #relet(e, name, owner, old, ttlMs) {
    const lease = await this.#takeLease(ttlMs, { fresh: true });
    const reply = await this.#kv.txn({
      compare: [{ key: name, target: VALUE, result: EQUAL, value: Buffer.from(owner) }],
      success: [{ request_put: { key: name, value: Buffer.from(owner), lease: lease.id } }],
      failure: [],
    });
    this.#revoke(reply.succeeded ? old : lease);
    if (!reply.succeeded) {
      if (e !== undefined) this.#forget(e);
      return false;
    }
    if (e !== undefined) e.lease = lease;
    return true;
  }

  /**
   * Deletes `owner`'s key on `key` (a transaction comparing its value): `true` when
   * it did, `false` when the key was gone (its lease lapsed) or is not the owner's.
   */
  async release(key, owner) {
    checkText('key', key);
    checkText('owner', owner);
    const e = this.#entries.get(`${key}\u0000${owner}`);
    if (e !== undefined) {
      this.#forget(e);
      return this.#delete(e.name, owner, e.lease);
    }
    const found = await this.#find(key, owner);
    if (found === undefined) return false;
    return this.#delete(found.key, owner, { id: String(found.lease), fresh: true, foreign: true });
  }

  /** Whether a key (a holder's, or a waiter's about to hold) exists on `key` (advisory). */
  async isLocked(key) {
    checkText('key', key);
    const prefix = this.#lockPrefix(key);
    const reply = await this.#kv.range({ key: prefix, range_end: rangeEnd(prefix), count_only: true });
    return Number(reply.count) > 0;
  }

  /** Milliseconds left on the holder's lease (whole seconds, as etcd counts), `undefined` when free (advisory). */
  async ttl(key) {
    checkText('key', key);
    const prefix = this.#lockPrefix(key);
    const first = (await this.#kv.range(firstRange(prefix, rangeEnd(prefix)).request_range)).kvs[0];
    if (first === undefined) return undefined;
    const reply = await this.#leases.leaseTimeToLive({ ID: first.lease });
    const seconds = Number(reply.TTL);
    return seconds > 0 ? seconds * 1000 : undefined;
  }

  /**
   * Calls `onReleased` with a grant `{ owner, fencingToken, age }` when the lock on
   * `key` comes to one of this store's waiters; it returns true to claim it (a grant
   * nobody claims is released). Returns a function that removes the listener
   * (idempotent). A no-op after `close()`.
   */
  subscribe(key, onReleased) {
    checkText('key', key);
    if (typeof onReleased !== 'function') {
      throw new TypeError(`onReleased must be a function, got ${describe(onReleased)}`);
    }
    if (this.#closed) return noop;
    return this.#listeners.add(key, onReleased);
  }

  /**
   * Takes this store's waiters out of their queues (their keys deleted, their leases
   * revoked), revokes its kept leases and ends its keep-alive stream. Leases the
   * engine holds stay theirs to release. The client stays open: close it after this.
   * The store still acquires, renews and releases afterwards, without waiting.
   */
  async close() {
    this.#closed = true;
    this.#listeners.clear();
    for (const timer of this.#lingerTimers.values()) clearTimeout(timer);
    this.#lingerTimers.clear();
    const work = [];
    for (const e of [...this.#entries.values()]) {
      if (e.state === WAITING || e.state === GRANTED) work.push(this.#leave(e));
    }
    for (const leases of this.#kept.values()) for (const lease of leases) work.push(this.#revoke(lease));
    this.#kept.clear();
    await Promise.allSettled(work);
    this.#keepAlives.close();
    this.#watches.close();
  }

  /**
   * Runs `call` (a request that may run twice: an acquire's transaction, a lease grant)
   * again when it timed out or its member went away, until `until` (performance.now()):
   * a request in flight when a leader dies waits out etcd's request timeout (5 s and
   * more), longer than many a ttl, while a new leader answers within an election.
   */
  async #retried(until, call) {
    for (;;) {
      try {
        return await call();
      } catch (err) {
        if (!isTransient(err) || performance.now() + RETRY_PAUSE_MS >= until) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
    }
  }

  /**
   * One keep-alive of `lease`, sent again until `until` while its stream fails: the
   * client opens each new stream on any of its hosts, a member that is down included.
   */
  #keepAlive(lease, until) {
    return this.#retried(until, () => this.#keepAlives.send(lease.id));
  }

  /**
   * gRPC call options whose deadline is a slice of the time left before `until`, so that
   * a retry fits. Read again by each attempt: the client sends a failed call again to its
   * next host with the same options, and a deadline already past would fail those at
   * once, each counted by that host's circuit breaker (3 in a row close the host to every
   * call of the client for 5 s: a whole cluster, after one election).
   */
  #callOptions(until) {
    return {
      get deadline() {
        const now = performance.now();
        const left = until - now;
        const slice = Math.max(MIN_SLICE_MS, Math.min(left, Math.max(MIN_SLICE_MS, left / 2)));
        // Never later than one slice past `until`: the engine gives up on a try at its ttl.
        return Date.now() + Math.min(slice, until + MIN_SLICE_MS - now);
      },
    };
  }

  // ---- leases ----------------------------------------------------------------------

  /** A kept lease of the ttl's seconds with time left, or a new one. */
  async #takeLease(ttlMs, { fresh = false } = {}) {
    const seconds = leaseSeconds(ttlMs);
    const kept = fresh ? undefined : this.#kept.get(seconds);
    const now = performance.now();
    while (kept !== undefined && kept.length > 0) {
      const lease = kept.pop();
      if (lease.keptAt + lease.granted * 1000 - KEPT_MARGIN_MS > now) {
        lease.fresh = false;
        return lease;
      }
    }
    const sentAt = performance.now();
    const until = sentAt + (2 * ttlMs) / 3;
    const reply = await this.#retried(until, () => this.#leases.leaseGrant({ TTL: seconds }, this.#callOptions(until)));
    if (reply.error) throw new Error(`EtcdLockStore: etcd refused a lease of ${seconds} s: ${reply.error}`);
    return { id: String(reply.ID), seconds, granted: Number(reply.TTL), keptAt: sentAt, fresh: true };
  }

  /** Keeps a lease that holds no key any more for a later acquire (or revokes it). */
  #keep(lease) {
    if (lease.foreign || this.#closed) return void this.#revoke(lease);
    let kept = this.#kept.get(lease.seconds);
    if (kept === undefined) {
      kept = [];
      this.#kept.set(lease.seconds, kept);
    }
    if (kept.length >= MAX_KEPT_LEASES) return void this.#revoke(lease);
    kept.push(lease);
  }

  /** Revokes a lease (and with it any key it holds); errors are moot: it lapses anyway. */
  #revoke(lease) {
    return Promise.resolve()
      .then(() => this.#leases.leaseRevoke({ ID: lease.id }))
      .then(noop, noop);
  }

  // ---- keys --------------------------------------------------------------------------

  #lockPrefix(key) {
    return Buffer.concat([this.#namespace, Buffer.from(`${this.#prefix}/${enc(key)}/`)]);
  }

  /** `owner`'s key on `key`, read from etcd (an owner this store has not seen). */
  async #find(key, owner) {
    const prefix = this.#lockPrefix(key);
    const reply = await this.#kv.range({ key: prefix, range_end: rangeEnd(prefix) });
    return reply.kvs.find((kv) => kv.value.toString() === owner);
  }

  /** Deletes `name` if its value is `owner`; keeps its lease for reuse when it did. */
  async #delete(name, owner, lease) {
    const reply = await this.#kv.txn({
      compare: [{ key: name, target: VALUE, result: EQUAL, value: Buffer.from(owner) }],
      success: [{ request_delete_range: { key: name } }],
      failure: [],
    });
    const deleted = reply.succeeded && Number(reply.responses[0].response_delete_range.deleted) > 0;
    if (deleted) this.#keep(lease);
    else this.#revoke(lease);
    return deleted;
  }

  /** Drops what the store keeps for `e` (its watch, its timer); its key stays in etcd. */
  #forget(e) {
    e.state = GONE;
    e.stopWatch();
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    const id = `${e.key}\u0000${e.owner}`;
    if (this.#entries.get(id) === e) this.#entries.delete(id);
  }

  /** Forgets the holders whose lease ran out by this store's count (see SWEEP_EVERY). */
  #sweep() {
    this.#untilSweep = SWEEP_EVERY;
    const now = performance.now();
    for (const e of [...this.#entries.values()]) {
      if (e.state === HELD && e.lease.keptAt + e.lease.granted * 1000 + SWEEP_MARGIN_MS < now) this.#forget(e);
    }
  }

  /** A waiter leaves the queue: its key deleted, its lease kept for reuse. */
  async #leave(e) {
    this.#forget(e);
    await this.#delete(e.name, e.owner, e.lease).catch(() => this.#revoke(e.lease));
  }

  // ---- waiting -----------------------------------------------------------------------

  /** Keeps a waiter's lease alive every ttl/3 while it waits; a lapsed one leaves. */
  #keepWaiting(e) {
    e.timer = setTimeout(async () => {
      e.timer = undefined;
      if (e.state !== WAITING) return;
      const sentAt = performance.now();
      const ttl = await this.#keepAlive(e.lease, sentAt + e.ttlMs / 3).catch(() => undefined);
      if (e.state !== WAITING) return;
      if (ttl === 0) return void this.#forget(e); // its key went with the lease
      if (ttl > 0) e.lease.keptAt = sentAt;
      this.#keepWaiting(e);
    }, Math.max(1, Math.floor(e.ttlMs / 3)));
    e.timer.unref?.();
  }

  /**
   * Watches the deletion of `ahead`, the key just before `e`'s, from the revision after
   * `revision` (where it was read): a deletion in between is not missed.
   */
  #watchAhead(e, ahead, aheadIsFirst, revision) {
    e.stopWatch();
    const gone = () => {
      if (e.state !== WAITING) return;
      if (aheadIsFirst) this.#granted(e);
      else this.#recheck(e);
    };
    // A watch that etcd ends (a compacted revision): the queue is read again.
    e.stopWatch = this.#watches.watch(ahead, revision + 1, gone, () => this.#recheckLater(e));
  }

  /** Reads who is ahead of `e` now: nobody (the lock is its), or a key to watch. */
  async #recheck(e) {
    if (e.state !== WAITING) return;
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
      if (rangeOf(reply, 2).length === 0) return void this.#forget(e); // its key lapsed with its lease
      const first = rangeOf(reply, 0)[0]?.key;
      const ahead = rangeOf(reply, 1)[0]?.key;
      if (ahead === undefined) return void this.#granted(e);
      this.#watchAhead(e, ahead, ahead.equals(first), revisionOf(reply, 'a read of the queue'));
    } catch {
      // Nobody awaits a recheck: a failure (etcd down, an odd answer) is tried again later.
      this.#recheckLater(e);
    }
  }

  #recheckLater(e) {
    if (e.state !== WAITING) return;
    e.stopWatch();
    const timer = setTimeout(() => this.#recheck(e), 1_000);
    timer.unref?.();
    e.stopWatch = () => clearTimeout(timer);
  }

  /** `e` is first: the lock is its owner's. Offered to the listeners; released if unclaimed. */
  #granted(e) {
    e.state = GRANTED;
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    const age = Math.max(0, performance.now() - e.lease.keptAt);
    const claimed = this.#listeners.offer(e.key, { owner: e.owner, fencingToken: e.rev, age });
    if (claimed) {
      if (e.state === GRANTED) e.state = HELD;
      return;
    }
    if (e.state === GRANTED) this.#leave(e).catch(noop);
  }

  /** A key lost its last listener: its waiters leave, unless a listener comes back meanwhile. */
  #listenersChanged(key) {
    const timer = this.#lingerTimers.get(key);
    if (timer !== undefined) clearTimeout(timer);
    this.#lingerTimers.delete(key);
    if (this.#listeners.has(key)) return;
    const since = performance.now();
    const drop = setTimeout(() => {
      this.#lingerTimers.delete(key);
      if (this.#listeners.has(key)) return;
      for (const e of [...this.#entries.values()]) {
        if (e.key === key && e.state === WAITING && e.createdAt <= since) this.#leave(e).catch(noop);
      }
    }, LINGER_MS);
    drop.unref?.();
    this.#lingerTimers.set(key, drop);
  }
}

module.exports = { EtcdLockStore };
