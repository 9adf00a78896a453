/**
 * `LockDurableObject`, the Durable Object of `leasehold/durable-object` (./index.mjs): one
 * object per lock key. It keeps the key's holders and its last fencing token in its
 * storage, queues waiters in arrival order, and hands permits to the head of the queue
 * when holders release them or let them lapse.
 *
 * The key's permits (issue 28, README "Limits and shared reads"): a plain lease is a key
 * of limit 1 taken with weight 1; a permit lock asks `weight` of `limit`; shared and
 * exclusive leases come as permits of SHARED_LIMIT. What must hold, at every step:
 * - the live holders' weights sum to at most the key's limit;
 * - while the key has holders or waiters it has one limit: a try asking another is
 *   answered `{ limit }` (the key's), so plain leases and permits never mix;
 * - a grant only when nobody queued is ahead (FIFO: a heavy head is never overtaken);
 * - one token counter per key: each grant's token exceeds every earlier one.
 * Every method runs to completion before the next (it does not await) and storage writes
 * are committed before its answer leaves (output gates): each is atomic for the key.
 * Expiry is judged by the object's clock alone.
 */
import { DurableObject } from 'cloudflare:workers';
import { acquireOptions, checkString, checkTtl } from '../shared/store-support.mjs';
import { inspectObject } from './inspect.mjs';

/** Each holder under a key of its own (`holder:<owner>`): one write per grant, renewal or release. */
const HOLDER = 'holder:';
const LIMIT = 'limit';
const LAST_TOKEN = 'lastToken';
/** What an object of an earlier release stored: its one lease. Read once, then kept as a holder. */
const LEASE = 'lease';
/**
 * A queued owner that has not asked again for this long has left. Its store keeps a
 * `wait` open for it, answered "still queued" every WAIT_MS and then asked again.
 */
const QUEUE_ENTRY_MS = 3_000;
const WAIT_MS = 1_000;
/** `wait`'s answer when WAIT_MS passed without a grant: the owner is still queued. */
const STILL_QUEUED = Object.freeze({ queued: true });

/**
 * The holders of one key. Export it from your Worker and bind it as a Durable Object
 * namespace (any binding name); `DurableObjectLockStore` is given that binding.
 */
export class LockDurableObject extends DurableObject {
  /**
   * Live holders, oldest grant first: owner -> { owner, token, expiresAt, weight, granted }.
   * `granted`: handed to a queued owner on release, not yet asked for again by it.
   */
  #holders = new Map();
  /** The key's limit while it has holders or waiters (1: plain leases); undefined when idle. */
  #limit;
  #lastToken = 0;
  /** Queued owners in arrival order: owner -> { ttlMs, weight, seenAt, since, notify }. */
  #queue = new Map();
  #expiryTimer;

  constructor(ctx, env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      const [saved, listed] = await Promise.all([ctx.storage.get([LIMIT, LAST_TOKEN, LEASE]), ctx.storage.list({ prefix: HOLDER })]);
      const holders = [...listed.values()];
      const lease = saved.get(LEASE);
      if (lease !== undefined) {
        holders.push({ ...lease, weight: 1 });
        await ctx.storage.put(HOLDER + lease.owner, { ...lease, weight: 1 });
        await ctx.storage.delete(LEASE);
      }
      for (const holder of holders.sort((a, b) => a.token - b.token)) this.#holders.set(holder.owner, holder); // oldest grant first
      this.#limit = saved.get(LIMIT) ?? (holders.length > 0 ? 1 : undefined);
      this.#lastToken = saved.get(LAST_TOKEN) ?? 0;
      this.#armExpiry();
    });
  }

  /**
   * Grants `owner` `weight` of the key's `limit` (a plain lease when both are undefined)
   * if they fit and nobody queued before: `{ fencingToken }`. Answers the permit a
   * release already handed to `owner`. `{ limit }` when the key is used with another
   * limit. Else null, after queueing `owner` when `queue` is true; a try without `queue`
   * (it will not wait) leaves the queue.
   */
  acquire(owner, ttlMs, options) {
    checkString('owner', owner);
    checkTtl(ttlMs);
    // A boolean: `queue` as a store of an earlier release passes it (a Worker deployed gradually).
    const { queue, limit = 1, weight = 1 } = acquireOptions(typeof options === 'boolean' ? { queue: options } : options);
    if (!queue && !this.#holders.has(owner)) this.#leave(owner);
    this.#settle();
    const held = this.#holders.get(owner);
    if (held !== undefined) {
      if (!held.granted) return null; // not reentrant
      this.#extend(held, ttlMs); // counted again from this try
      return { fencingToken: held.token };
    }
    if (this.#limit !== undefined && this.#limit !== limit) return { limit: this.#limit };
    if (this.#queue.size === 0 && this.#used() + weight <= limit) {
      this.#limit = limit;
      return { fencingToken: this.#grant(owner, ttlMs, weight, false) };
    }
    if (queue) this.#enqueue(owner, ttlMs, weight, limit);
    return null;
  }

  /** Pushes the expiry of `owner`'s live permit to now + ttlMs: true. Else false. */
  renew(owner, ttlMs) {
    checkString('owner', owner);
    checkTtl(ttlMs);
    this.#settle();
    const held = this.#holders.get(owner);
    if (held === undefined) return false;
    this.#extend(held, ttlMs);
    return true;
  }

  /**
   * Ends `owner`'s permit (true when it was live) and hands the permits on to the head of
   * the queue. A queued owner leaves the queue.
   */
  release(owner) {
    checkString('owner', owner);
    this.#leave(owner);
    this.#dropLapsed();
    const had = this.#holders.delete(owner);
    if (had) this.#save(owner);
    this.#settle();
    return had;
  }

  /**
   * Answers `{ fencingToken }` when permits are handed to `owner`, which a try queued;
   * `{ queued: true }` when WAIT_MS passed first (ask again: asking keeps the owner
   * queued); null when `owner` is not queued or leaves the queue.
   */
  wait(owner) {
    checkString('owner', owner);
    this.#settle();
    const held = this.#holders.get(owner);
    if (held?.granted) return { fencingToken: held.token };
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

  /** Whether anyone holds the key (advisory). */
  isLocked() {
    this.#settle();
    return this.#holders.size > 0;
  }

  /** How many owners wait for the key (advisory). */
  queueLength() {
    this.#settle(); // those that stopped asking leave first
    return this.#queue.size;
  }

  /** The holders and the queued owners, read only: `{ holders, waiters, limit? }` or null. */
  inspect() {
    return inspectObject(this.#holders, this.#limit, this.#queue, Date.now(), QUEUE_ENTRY_MS);
  }

  /** Milliseconds until the last live permit lapses unless renewed; undefined when free (advisory). */
  ttl() {
    this.#settle();
    if (this.#holders.size === 0) return undefined;
    let last = 0;
    for (const holder of this.#holders.values()) last = Math.max(last, holder.expiresAt);
    return last - Date.now();
  }

  /** The sum of the live holders' weights. */
  #used() {
    let used = 0;
    for (const holder of this.#holders.values()) used += holder.weight;
    return used;
  }

  /**
   * Gives `owner` `weight` permits and the key's next token (returned); its open `wait`,
   * if any, is answered with it.
   */
  #grant(owner, ttlMs, weight, granted) {
    const token = Math.max(this.#lastToken + 1, Date.now() * 1000);
    this.#lastToken = token;
    const entry = this.#queue.get(owner);
    this.#queue.delete(owner);
    this.#holders.set(owner, { owner, token, expiresAt: Date.now() + ttlMs, weight, granted });
    this.#save(owner);
    entry?.notify?.({ fencingToken: token });
    return token;
  }

  #extend(holder, ttlMs) {
    holder.expiresAt = Date.now() + ttlMs;
    this.#save(holder.owner);
  }

  /**
   * Writes `owner`'s holder (or its absence), the key's limit and its last token; the
   * answer leaves only once they are stored. The key forgets its limit once nobody
   * holds or waits.
   */
  #save(owner) {
    if (this.#holders.size === 0 && this.#queue.size === 0) this.#limit = undefined;
    const holder = this.#holders.get(owner);
    if (holder === undefined) this.ctx.storage.delete(HOLDER + owner);
    this.ctx.storage.put({ ...(holder && { [HOLDER + owner]: holder }), [LIMIT]: this.#limit, [LAST_TOKEN]: this.#lastToken });
    this.#armExpiry();
  }

  /**
   * Brings the key up to now: lapsed holders' permits return, queued owners that stopped
   * asking leave, and the queue's head is handed permits while each fits.
   */
  #settle() {
    this.#dropLapsed();
    let used = this.#used();
    for (const [owner, entry] of this.#queue) {
      if (Date.now() - entry.seenAt > QUEUE_ENTRY_MS) {
        this.#leave(owner);
        continue;
      }
      if (used + entry.weight > this.#limit) break; // FIFO: nobody behind the head overtakes it
      used += entry.weight;
      this.#grant(owner, entry.ttlMs, entry.weight, true);
    }
    if (this.#holders.size === 0 && this.#queue.size === 0) this.#limit = undefined;
  }

  #dropLapsed() {
    for (const [owner, holder] of this.#holders) {
      if (holder.expiresAt > Date.now()) continue;
      this.#holders.delete(owner);
      this.#save(owner);
    }
  }

  /** A timer for the earliest expiry: its permits return and pass on even if nobody calls. */
  #armExpiry() {
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    if (this.#holders.size === 0) return;
    let next = Infinity;
    for (const holder of this.#holders.values()) next = Math.min(next, holder.expiresAt);
    this.#expiryTimer = setTimeout(() => this.#settle(), Math.max(0, next - Date.now()));
  }

  #enqueue(owner, ttlMs, weight, limit) {
    const entry = this.#queue.get(owner);
    if (entry !== undefined) {
      entry.seenAt = Date.now();
      entry.ttlMs = ttlMs;
      return;
    }
    this.#limit = limit;
    this.#queue.set(owner, { ttlMs, weight, seenAt: Date.now(), since: Date.now(), notify: undefined });
  }

  #leave(owner) {
    const entry = this.#queue.get(owner);
    if (entry === undefined) return;
    this.#queue.delete(owner);
    entry.notify?.(null);
  }
}
