/**
 * `leasehold/durable-object`: leases kept by a Cloudflare Durable Object, for Workers that
 * must coordinate across requests, isolates and locations. Two parts:
 *
 * - `LockDurableObject`, a Durable Object class the Worker exports and binds (one object
 *   per lock key, named `${prefix}:${key}`). It keeps the key's lease and its last
 *   fencing token in its storage, queues waiters in arrival order, and hands the lease to
 *   the first of them when the holder releases it or lets it expire.
 * - `DurableObjectLockStore`, the `LockStore` the engine calls: one RPC to the key's
 *   object per acquire, renew and release. A waiter also keeps one `wait` RPC open to the
 *   object, answered when the object hands it the lease: the waiting request has I/O of
 *   its own in flight (workerd cancels a request that only waits for another request's
 *   promise), and the lease comes to it without polling.
 *
 * What it promises
 * - Every method of the object runs to completion before the next (a Durable Object runs
 *   one event at a time between awaits, and these methods do not await), and storage
 *   writes are committed before its answer leaves (output gates): each is atomic.
 * - Expiry is judged by the object's clock alone. Tokens are the larger of the key's last
 *   token + 1 and the object's wall clock in microseconds, so they only ever increase.
 * - A lease that expires (its holder's request ended without releasing) passes to the
 *   first waiter when it runs out.
 */
import { DurableObject } from 'cloudflare:workers';
import { GrantListeners, checkOptions, checkString, checkTtl, describe } from '../shared/store-support.mjs';
import { inspectObject, cannotList } from './inspect.mjs';

const LEASE = 'lease';
const LAST_TOKEN = 'lastToken';
/**
 * A queued owner that has not asked again for this long has left. Its store keeps a
 * `wait` open for it, answered "still queued" every WAIT_MS and then asked again.
 */
const QUEUE_ENTRY_MS = 3_000;
const WAIT_MS = 1_000;
/** `wait`'s answer when WAIT_MS passed without a grant: the owner is still queued. */
const STILL_QUEUED = Object.freeze({ queued: true });
const STORE_OPTIONS = ['namespace', 'prefix'];

/**
 * The lease of one key. Export it from your Worker and bind it as a Durable Object
 * namespace (any binding name); `DurableObjectLockStore` is given that binding.
 */
export class LockDurableObject extends DurableObject {
  /** { owner, token, expiresAt, granted } | undefined; `granted`: handed to a queued owner by a release. */
  #lease;
  #lastToken = 0;
  /** Queued owners in arrival order: owner -> { ttlMs, seenAt, since, notify }. */
  #queue = new Map();
  #expiryTimer;

  constructor(ctx, env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      const saved = await ctx.storage.get([LEASE, LAST_TOKEN]);
      this.#lease = saved.get(LEASE);
      this.#lastToken = saved.get(LAST_TOKEN) ?? 0;
      this.#armExpiry();
    });
  }

  /**
   * Takes the lease for `owner` if it is free and nobody queued before: `{ fencingToken }`.
   * Answers the lease a release already handed to `owner`. Else null, after queueing
   * `owner` when `queue` is true; a try without `queue` (it will not wait) leaves the queue.
   */
  acquire(owner, ttlMs, queue) {
    checkString('owner', owner);
    checkTtl(ttlMs);
    this.#expireIfDue();
    if (queue !== true && this.#lease?.owner !== owner) this.#leave(owner);
    const lease = this.#lease;
    if (lease !== undefined) {
      if (lease.owner === owner && lease.granted) {
        this.#extend(ttlMs); // counted again from this try
        return { fencingToken: lease.token };
      }
      if (queue === true) this.#enqueue(owner, ttlMs);
      return null;
    }
    const first = this.#firstWaiter();
    if (first !== undefined && first !== owner) {
      if (queue === true) this.#enqueue(owner, ttlMs);
      return null;
    }
    this.#take(owner, ttlMs, false);
    return { fencingToken: this.#lease.token };
  }

  /** Pushes the expiry of `owner`'s live lease to now + ttlMs: true. Else false. */
  renew(owner, ttlMs) {
    checkString('owner', owner);
    checkTtl(ttlMs);
    this.#expireIfDue();
    if (this.#lease?.owner !== owner) return false;
    this.#extend(ttlMs);
    return true;
  }

  /** Ends `owner`'s lease (true when it was live) and hands it to the first waiter. A queued owner leaves the queue. */
  release(owner) {
    checkString('owner', owner);
    this.#leave(owner);
    this.#expireIfDue();
    if (this.#lease?.owner !== owner) return false;
    this.#setLease(undefined);
    this.#grantNext();
    return true;
  }

  /**
   * Answers `{ fencingToken }` when the lease is handed to `owner`, which a try queued;
   * `{ queued: true }` when WAIT_MS passed first (ask again: asking keeps the owner
   * queued); null when `owner` is not queued or leaves the queue.
   */
  wait(owner) {
    checkString('owner', owner);
    this.#expireIfDue();
    if (this.#lease?.owner === owner && this.#lease.granted) return { fencingToken: this.#lease.token };
    const entry = this.#queue.get(owner);
    if (entry === undefined) return null;
    entry.seenAt = Date.now();
    entry.notify?.(STILL_QUEUED); // one wait per owner: an earlier one is answered
    return new Promise((resolve) => {
      const notify = (answer) => {
        clearTimeout(timer);
        if (entry.notify === notify) entry.notify = undefined;
        resolve(answer);
      };
      const timer = setTimeout(() => notify(STILL_QUEUED), WAIT_MS);
      entry.notify = notify;
    });
  }

  /** Whether the lease is live (advisory). */
  isLocked() {
    this.#expireIfDue();
    return this.#lease !== undefined;
  }

  /** How many owners wait for the lease (advisory). */
  queueLength() {
    this.#firstWaiter(); // those that stopped asking leave first
    return this.#queue.size;
  }

  /** The lease and the queued owners, read only: `{ holders, waiters }` or null. */
  inspect() {
    return inspectObject(this.#lease, this.#queue, Date.now(), QUEUE_ENTRY_MS);
  }

  /** Milliseconds left on the live lease, undefined when free (advisory). */
  ttl() {
    this.#expireIfDue();
    return this.#lease === undefined ? undefined : this.#lease.expiresAt - Date.now();
  }

  /** Gives `owner` a new lease and token; its open `wait`, if any, is answered with it. */
  #take(owner, ttlMs, granted) {
    const token = Math.max(this.#lastToken + 1, Date.now() * 1000);
    this.#lastToken = token;
    const entry = this.#queue.get(owner);
    this.#queue.delete(owner);
    this.#setLease({ owner, token, expiresAt: Date.now() + ttlMs, granted });
    entry?.notify?.({ fencingToken: token });
  }

  #extend(ttlMs) {
    this.#setLease({ ...this.#lease, expiresAt: Date.now() + ttlMs });
  }

  /** Sets the lease and writes it with the last token; the answer leaves only once both are stored. */
  #setLease(lease) {
    this.#lease = lease;
    this.ctx.storage.put({ [LEASE]: lease, [LAST_TOKEN]: this.#lastToken });
    this.#armExpiry();
  }

  /** A lease past its expiry ends, and passes to the first waiter. */
  #expireIfDue() {
    if (this.#lease !== undefined && this.#lease.expiresAt <= Date.now()) {
      this.#setLease(undefined);
      this.#grantNext();
    }
  }

  #armExpiry() {
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    if (this.#lease === undefined) return;
    this.#expiryTimer = setTimeout(() => this.#expireIfDue(), Math.max(0, this.#lease.expiresAt - Date.now()));
  }

  #enqueue(owner, ttlMs) {
    const entry = this.#queue.get(owner);
    if (entry !== undefined) {
      entry.seenAt = Date.now();
      entry.ttlMs = ttlMs;
    } else {
      this.#queue.set(owner, { ttlMs, seenAt: Date.now(), since: Date.now(), notify: undefined });
    }
  }

  /** The first queued owner still asking; those that stopped asking leave. */
  #firstWaiter() {
    for (const [owner, entry] of this.#queue) {
      if (Date.now() - entry.seenAt <= QUEUE_ENTRY_MS) return owner;
      this.#leave(owner);
    }
    return undefined;
  }

  #leave(owner) {
    const entry = this.#queue.get(owner);
    if (entry === undefined) return;
    this.#queue.delete(owner);
    entry.notify?.(null);
  }

  /** Hands the free lease to the first waiter: a new lease and token, answered through its open `wait`. */
  #grantNext() {
    const owner = this.#firstWaiter();
    if (owner === undefined) return;
    this.#take(owner, this.#queue.get(owner).ttlMs, true);
  }
}

/**
 * A `LockStore` on `LockDurableObject`: `namespace` is the Durable Object binding
 * (`env.LOCKS`), `prefix` (default `'leasehold'`) names the object of each key.
 */
export class DurableObjectLockStore {
  #namespace;
  #prefix;
  #listeners = new GrantListeners();
  /** Owners this store queued, with an open `wait`: owner -> { key, sentAt }. */
  #queued = new Map();

  constructor(options) {
    checkOptions(options, STORE_OPTIONS, 'DurableObjectLockStore');
    const { namespace, prefix = 'leasehold' } = options;
    if (typeof namespace?.idFromName !== 'function' || typeof namespace?.get !== 'function') {
      throw new TypeError(
        `namespace must be a Durable Object namespace binding (env.LOCKS, bound to LockDurableObject), got ${describe(namespace)}`,
      );
    }
    checkString('prefix', prefix);
    this.#namespace = namespace;
    this.#prefix = prefix;
  }

  /** The object queues waiters and hands them the lease on release (see `subscribe`). */
  get grantsOnRelease() {
    return true;
  }

  async acquire(key, owner, ttlMs, options) {
    checkString('key', key);
    const sentAt = Date.now();
    const queue = options?.queue === true;
    if (!queue) this.#queued.delete(owner); // a try that will not wait: the object takes it out of the queue
    const answer = await this.#stub(key).acquire(owner, ttlMs, queue);
    if (answer) {
      this.#queued.delete(owner);
      return { fencingToken: answer.fencingToken };
    }
    if (queue && !this.#queued.has(owner)) this.#wait(key, owner, sentAt);
    return undefined;
  }

  async renew(key, owner, ttlMs) {
    checkString('key', key);
    return this.#stub(key).renew(owner, ttlMs);
  }

  async release(key, owner) {
    checkString('key', key);
    this.#queued.delete(owner);
    return this.#stub(key).release(owner);
  }

  async isLocked(key) {
    checkString('key', key);
    return this.#stub(key).isLocked();
  }

  async ttl(key) {
    checkString('key', key);
    return this.#stub(key).ttl();
  }

  /** The holder of `key` and its queued waiters (`since`: the object's clock), undefined when none. */
  async inspect(key) {
    checkString('key', key);
    const found = await this.#stub(key).inspect();
    return found == null ? undefined : { key, holders: found.holders, waiters: found.waiters };
  }

  /** Not possible here: a TypeError (lib/durable-object-inspect.mjs). */
  list() {
    cannotList();
  }

  /** How many owners wait for `key` (advisory). */
  async queueLength(key) {
    checkString('key', key);
    return this.#stub(key).queueLength();
  }

  /**
   * Calls `onReleased(grant)` (`{ owner, fencingToken, age }`) when the object handed the
   * lease on `key` to an owner this store queued; the listener returns true to claim it.
   * A grant nobody claims is released, so that it passes on. Returns a function that
   * removes the listener (idempotent).
   */
  subscribe(key, onReleased) {
    return this.#listeners.add(key, onReleased);
  }

  // A stub is an I/O object of the request that made it: one per call, never kept.
  #stub(key) {
    return this.#namespace.get(this.#namespace.idFromName(`${this.#prefix}:${key}`));
  }

  /**
   * Keeps a `wait` open for `owner` while it is queued, asking again each time the object
   * answers "still queued": the waiting request always has I/O of its own in flight, and
   * asking keeps its place. A grant came after the object answered the previous call (or
   * the try that queued the owner, sent at `sentAt`), so the lease began at most
   * `now - <when that call was sent>` ago on this clock.
   */
  #wait(key, owner, sentAt) {
    const queued = { key };
    this.#queued.set(owner, queued);
    const ask = (since) => {
      const sent = Date.now();
      this.#stub(key)
        .wait(owner)
        .then(
          (answer) => {
            if (answer?.queued === true) {
              if (this.#queued.get(owner) === queued) ask(sent);
              return;
            }
            if (this.#queued.get(owner) === queued) this.#queued.delete(owner);
            if (!answer) return;
            const grant = { owner, fencingToken: answer.fencingToken, age: Math.max(0, Date.now() - since) };
            if (!this.#listeners.offer(key, grant)) this.#stub(key).release(owner).catch(() => {});
          },
          () => {
            // The object went away (evicted, redeployed): the waiter's next poll queues it again.
            if (this.#queued.get(owner) === queued) this.#queued.delete(owner);
          },
        );
    };
    ask(sentAt);
  }
}
