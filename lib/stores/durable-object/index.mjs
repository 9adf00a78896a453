/**
 * `leasehold/durable-object`: leases kept by a Cloudflare Durable Object, for Workers that
 * must coordinate across requests, isolates and locations. Two parts:
 *
 * - `LockDurableObject` (./object.mjs), a Durable Object class the Worker exports and
 *   binds (one object per lock key, named `${prefix}:${key}`). It keeps the key's
 *   holders and its last fencing token in its storage, queues waiters in arrival order,
 *   and hands permits to the head of the queue when holders release them or let them
 *   lapse.
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
 * - Permits (`limit`, `weight`, and `mode` as permits of SHARED_LIMIT): several holders
 *   per key, their weights summed to at most the key's limit, handed out in queue order;
 *   each holder is renewed, released and lapses on its own (./object.mjs).
 */
import { GrantListeners, acquireOptions, checkOptions, checkString, describe } from '../shared/store-support.mjs';
import { cannotList } from './inspect.mjs';
import { LockDurableObject } from './object.mjs';

export { LockDurableObject };

const STORE_OPTIONS = ['namespace', 'prefix'];

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

  /** Limit, weight and mode (as permits of SHARED_LIMIT): see ./object.mjs. */
  get permits() {
    return true;
  }

  /**
   * `{ fencingToken }` when granted; `{ limit }` when the key is held or awaited with
   * another limit (a plain lock's is 1); else undefined, after queueing `owner` when
   * `options.queue` is true.
   */
  async acquire(key, owner, ttlMs, options) {
    checkString('key', key);
    const { queue, limit, weight } = acquireOptions(options);
    const sentAt = Date.now();
    if (!queue) this.#queued.delete(owner); // a try that will not wait: the object takes it out of the queue
    const answer = await this.#stub(key).acquire(owner, ttlMs, { queue, limit, weight });
    if (answer?.fencingToken !== undefined) {
      this.#queued.delete(owner);
      return { fencingToken: answer.fencingToken };
    }
    if (answer?.limit !== undefined) return { limit: answer.limit };
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

  /**
   * The holders of `key` (oldest grant first; with their weight, and mode on a key used
   * with modes), its queued waiters (`since`: the object's clock) and, on a key held with
   * permits, its `limit`; undefined when none.
   */
  async inspect(key) {
    checkString('key', key);
    const found = await this.#stub(key).inspect();
    return found == null ? undefined : { key, ...found };
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
