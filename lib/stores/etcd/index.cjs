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
 * Permits (`{ limit, weight }`, limit > 1; shared and exclusive modes arrive as permits
 * of SHARED_LIMIT). Each holder and waiter keeps a key of its own, named with its limit
 * and weight (lib/stores/etcd/permit-keys.cjs), under its own lease: renewed, released
 * and lapsing alone. In create-revision order a key holds iff the weights up to it, its
 * own included, fit in the limit: FIFO, a head that does not fit blocks those behind
 * it, and the token (a create revision) of every grant exceeds those granted before.
 * Keys of two limits (a plain lock's are of limit 1) are never on a lock at once: every
 * put compares the other limits' ranges empty, and a try refused so answers `{ limit }`.
 * A waiter watches one key or range (waiting.cjs): no crowd is woken.
 *
 * The watches and the keep-alives go over one stream each of the client's
 * (lib/stores/etcd/watch.cjs, lib/stores/etcd/keepalive.cjs), opened when needed and ended once idle.
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

const { describe, checkOptionNames } = require('../../common/describe.cjs');
const { checkText, checkTtl, checkListener, checkOptionsObject } = require('../shared/checks.cjs');
const { acquireOptions } = require('../shared/permits.cjs');
const { KeepAlives } = require('./keepalive.cjs');
const { DeletionWatches } = require('./watch.cjs');
const { EtcdLeases } = require('./leases.cjs');
const { EtcdQueue, WAITING, GRANTED, HELD } = require('./waiting.cjs');
const { CREATE, EQUAL, VALUE, enc, rangeEnd, isEtcdClient, revisionOf, rangeOf, firstRange, lastTwoRange, noKeys } = require('./requests.cjs');
const { permitRange, permitsStart, permitName, keyPermits } = require('./permit-keys.cjs');
const { EtcdPermits } = require('./permit-acquire.cjs');
const { etcdInspector } = require('./inspect.cjs');
const { checkListOptions } = require('../../common/list-options.cjs');

function noop() {}

// A waiter whose position has not been read for this long is read again when its
// engine asks (a safety net under the watch; the watch is what serves it).
const RECHECK_MS = 5_000;

class EtcdLockStore {
  #kv;
  #leaseClient;
  #keepAlives;
  #watches;
  #leases; // kept leases, retried requests (leases.cjs)
  #queue; // holders and waiters, and how they wait (waiting.cjs)
  #permits; // acquire for permits (permit-acquire.cjs)
  #prefix;
  #namespace; // the client's namespace prefix (a Buffer), first in every key
  #closed = false;
  #inspector;

  /** @param {{ client: object, prefix?: string }} options */
  constructor(options) {
    checkOptionsObject(options, 'a client');
    checkOptionNames(options, ['client', 'prefix'], 'EtcdLockStore');
    const { client, prefix = 'leasehold' } = options;
    if (!isEtcdClient(client)) {
      throw new TypeError(`client must be an Etcd3 client (from the etcd3 package), got ${describe(client)}`);
    }
    checkText('prefix', prefix);
    this.#kv = client.kv;
    this.#leaseClient = client.leaseClient;
    this.#keepAlives = new KeepAlives(client.leaseClient);
    this.#watches = new DeletionWatches(client.watchClient);
    this.#leases = new EtcdLeases(client.leaseClient, this.#keepAlives);
    this.#queue = new EtcdQueue(client.kv, this.#watches, this.#leases);
    this.#permits = new EtcdPermits(client.kv, this.#queue, this.#leases);
    this.#prefix = prefix;
    this.#namespace = Buffer.isBuffer(client.prefix) ? client.prefix : Buffer.alloc(0);
    this.#inspector = etcdInspector({ kv: client.kv, leases: client.leaseClient, namespace: this.#namespace, prefix });
  }

  /** The holder of `key` and its waiters in queue order, undefined when none (inspect.cjs). */
  async inspect(key) {
    checkText('key', key);
    return this.#inspector.inspect(key);
  }

  /** The keys held, by range reads: at most `limit`, starting with `prefix` (inspect.cjs). */
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

  /** Permits: limit, weight and (as permits of SHARED_LIMIT) shared and exclusive modes. */
  get permits() {
    return true;
  }

  /**
   * Takes the lock on `key` for `ttlMs`: resolves to `{ fencingToken }`, or `undefined`
   * when it is held (by anyone: locks are not reentrant). With `{ queue: true }` the
   * owner then stays in the key's queue and is granted the lock in its turn (see
   * Waiting at the top); asked again, it answers from that: `undefined` while the owner
   * waits, the lease once it was handed over (counted again from this call). Without
   * it, nothing is left behind. With `{ limit, weight }`, a permit (see Permits at the
   * top); `{ limit }` when the lock is held or awaited with another limit.
   */
  async acquire(key, owner, ttlMs, options) {
    checkText('key', key);
    checkText('owner', owner);
    checkTtl(ttlMs);
    const asked = acquireOptions(options);
    const queue = asked.queue && !this.#closed;
    const limit = asked.limit ?? 1; // a limit of 1 is a plain lock, its keys plain ones
    if (limit === 1) return this.#acquire(key, owner, ttlMs, queue, limit, undefined);
    // Holders granted together may be answered in any order: the engine takes each
    // token against what it had seen when it asked (core/src/fencing.rs).
    const answer = await this.#acquire(key, owner, ttlMs, queue, limit, asked.weight);
    if (answer?.fencingToken !== undefined) this.#queue.beforeGrant(key, answer.fencingToken);
    return answer;
  }

  async #acquire(key, owner, ttlMs, queue, limit, weight) {
    const entry = this.#queue.get(key, owner);
    if (entry !== undefined) {
      if ((entry.limit ?? 1) !== limit) return { limit: entry.limit ?? 1 };
      return this.#askedAgain(entry, queue, ttlMs);
    }

    const lease = await this.#leases.take(ttlMs);
    const prefix = this.#lockPrefix(key);
    const end = rangeEnd(prefix);
    const name =
      limit > 1
        ? permitName(prefix, limit, weight, lease.id)
        : Buffer.concat([prefix, Buffer.from(BigInt(lease.id).toString(16))]);
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
    const e = {
      key,
      owner,
      ttlMs,
      lease,
      name,
      prefix,
      end,
      rev: 0,
      state: HELD,
      stopWatch: noop,
      timer: undefined,
      checkedAt: sentAt,
      createdAt: sentAt,
    };
    if (limit > 1) {
      e.limit = limit;
      e.weight = weight;
      e.start = permitRange(prefix, limit);
      e.stop = rangeEnd(e.start);
    }
    let reply;
    try {
      reply = await this.#leases.retried(sentAt + (2 * ttlMs) / 3, () => this.#kv.txn(
        e.limit !== undefined
          ? this.#permits.request(e, put, queue)
          : queue
          ? {
              // Not while permits are held or awaited here: a plain lease never joins them.
              compare: [noKeys(permitsStart(prefix), end)],
              success: [put, firstRange(prefix, end), lastTwoRange(prefix, end), mine],
              failure: [firstRange(prefix, end)],
            }
          : {
              // Only when no key is under the prefix: a try that does not wait never
              // writes ahead of the queue, nor leaves anything behind.
              compare: [{ key: prefix, range_end: end, target: CREATE, result: EQUAL, create_revision: 0 }],
              success: [put],
              failure: [firstRange(prefix, end), mine],
            },
        this.#leases.callOptions(sentAt + (2 * ttlMs) / 3),
      ));
      if (refreshed !== undefined) {
        // The keep-alive is sent again if its stream failed (a member gone): from later
        // still, so the lease is kept at least as long.
        let again = false;
        const ttl = await this.#leases.retried(sentAt + (2 * ttlMs) / 3, () => (again ? this.#keepAlives.send(lease.id) : ((again = true), refreshed)));
        if (ttl <= 0) throw new Error('EtcdLockStore: a kept lease lapsed');
      }
    } catch (err) {
      refreshed?.catch(noop);
      // The put may have been applied and its answer lost: the revoke takes the key too.
      this.#leases.revoke(lease);
      throw err;
    }
    if (!lease.fresh) lease.keptAt = sentAt;
    const txnRev = revisionOf(reply, 'acquire');
    e.rev = txnRev;
    this.#queue.counted();
    if (e.limit !== undefined) return this.#permits.answer(e, reply, put, queue, sentAt + (2 * ttlMs) / 3);
    if (queue && !reply.succeeded) return this.#otherLimit(lease, prefix, rangeOf(reply, 0)[0]);
    if (!queue && reply.succeeded) {
      this.#queue.add(e);
      return { fencingToken: e.rev };
    }
    const [firstAt, mineAt] = queue ? [1, 3] : [0, 1];
    const own = rangeOf(reply, mineAt)[0];
    if (own === undefined) return this.#otherLimit(lease, prefix, rangeOf(reply, firstAt)[0]); // held, nothing of ours written
    e.rev = Number(own.create_revision);
    this.#queue.add(e);
    const first = rangeOf(reply, firstAt)[0]?.key;
    if (first === undefined || first.equals(name)) return { fencingToken: e.rev };
    e.state = WAITING;
    this.#queue.keepWaiting(e);
    if (!queue) {
      // A retried try that does not wait, whose first attempt was applied: it leaves.
      await this.#queue.leave(e);
      return undefined;
    }
    if (e.rev !== txnRev) {
      this.#queue.recheck(e); // created by an earlier attempt: who is just before it is read again
      return undefined;
    }
    // Descending by create revision: this key, then the one just before it.
    const ahead = rangeOf(reply, 2)[1]?.key;
    this.#queue.watchAhead(e, ahead, ahead.equals(first), e.rev);
    return undefined;
  }

  /** A plain try wrote nothing: `{ limit }` when `first`, the lock's first key, is a permit's. */
  #otherLimit(lease, prefix, first) {
    this.#leases.keep(lease);
    const limit = first === undefined ? 1 : keyPermits(prefix, first.key).limit;
    return limit > 1 ? { limit } : undefined;
  }

  /** An owner with a key here asks again (the engine's poll, or its last try). */
  async #askedAgain(e, queue, ttlMs) {
    if (e.state === WAITING) {
      if (!queue) {
        await this.#queue.leave(e); // it will not wait any more
        return undefined;
      }
      if (performance.now() - e.checkedAt > RECHECK_MS) this.#queue.recheck(e);
      return undefined;
    }
    // The lock is the owner's already (handed over): counted again from this try.
    const sentAt = performance.now();
    const ttl = await this.#leases.keepAlive(e.lease, sentAt + (2 * ttlMs) / 3);
    if (ttl <= 0) {
      this.#queue.forget(e);
      return this.#acquire(e.key, e.owner, ttlMs, queue, e.limit ?? 1, e.weight);
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
    const e = this.#queue.get(key, owner);
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
      if (e !== undefined) this.#queue.forget(e);
      return false;
    }
    lease.keptAt = sentAt;
    // A keep-alive answers the lease's whole TTL, which it keeps: a longer ttl takes a new lease.
    if (ttl * 1000 >= ttlMs) return true;
    return this.#relet(e, name, owner, lease, ttlMs);
  }

  /** Moves `owner`'s key to a new lease of `ttlMs` (its create revision, the token, stays). */
  async #relet(e, name, owner, old, ttlMs) {
    const lease = await this.#leases.take(ttlMs, { fresh: true });
    const reply = await this.#kv.txn({
      compare: [{ key: name, target: VALUE, result: EQUAL, value: Buffer.from(owner) }],
      success: [{ request_put: { key: name, value: Buffer.from(owner), lease: lease.id } }],
      failure: [],
    });
    this.#leases.revoke(reply.succeeded ? old : lease);
    if (!reply.succeeded) {
      if (e !== undefined) this.#queue.forget(e);
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
    const e = this.#queue.get(key, owner);
    if (e !== undefined) {
      this.#queue.forget(e);
      return this.#queue.delete(e.name, owner, e.lease);
    }
    const found = await this.#find(key, owner);
    if (found === undefined) return false;
    return this.#queue.delete(found.key, owner, { id: String(found.lease), fresh: true, foreign: true });
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
    const reply = await this.#leaseClient.leaseTimeToLive({ ID: first.lease });
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
    checkListener(onReleased);
    if (this.#closed) return noop;
    return this.#queue.listeners.add(key, onReleased);
  }

  /**
   * Takes this store's waiters out of their queues (their keys deleted, their leases
   * revoked), revokes its kept leases and ends its keep-alive stream. Leases the
   * engine holds stay theirs to release. The client stays open: close it after this.
   * The store still acquires, renews and releases afterwards, without waiting.
   */
  async close() {
    this.#closed = true;
    this.#leases.closed = true;
    const work = [...this.#queue.close(), ...this.#leases.revokeKept()];
    await Promise.allSettled(work);
    this.#keepAlives.close();
    this.#watches.close();
  }

  #lockPrefix(key) {
    return Buffer.concat([this.#namespace, Buffer.from(`${this.#prefix}/${enc(key)}/`)]);
  }

  /** `owner`'s key on `key`, read from etcd (an owner this store has not seen). */
  async #find(key, owner) {
    const prefix = this.#lockPrefix(key);
    const reply = await this.#kv.range({ key: prefix, range_end: rangeEnd(prefix) });
    return reply.kvs.find((kv) => kv.value.toString() === owner);
  }
}

module.exports = { EtcdLockStore };
