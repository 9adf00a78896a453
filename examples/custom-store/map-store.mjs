// A lock store over a Map: the whole LockStore contract in a few lines, permits included.
// The engine (waiting, polling, renewal, loss detection, fencing) comes for free; the
// store only keeps leases. Swap the Map for your own backend, keeping each method atomic
// per key. Time is this process's monotonic clock, or the `clock` given (a
// FakeTimeProvider in tests); a shared backend should use its own clock.

export class MapLockStore {
  #keys = new Map(); // key -> { limit, holders: Map(owner -> { weight, expiresAt }) }
  #lastToken = 0; // one counter for every key: tokens increase per key (and overall)
  #clock;

  constructor({ clock = performance } = {}) {
    this.#clock = clock;
  }

  // Keeps permits: locks with `limit`, `weight` and `mode` may use this store.
  get permits() {
    return true;
  }

  // A plain lease is 1 permit of a key of limit 1. Grant when the key's holders leave
  // room for `weight` (and `owner` holds none of it): a new, larger fencing token.
  // Otherwise undefined, or { limit } when the key is held with another limit.
  async acquire(key, owner, ttlMs, options) {
    check(key, owner, ttlMs);
    const { limit, weight } = permitsOf(options);
    const held = this.#live(key);
    if (held && held.limit !== limit) return { limit: held.limit };
    const entry = held ?? { limit, holders: new Map() };
    let used = 0;
    for (const holder of entry.holders.values()) used += holder.weight;
    if (entry.holders.has(owner) || used + weight > limit) return undefined;
    entry.holders.set(owner, { weight, expiresAt: this.#clock.now() + ttlMs });
    this.#keys.set(key, entry);
    this.#lastToken += 1;
    return { fencingToken: this.#lastToken };
  }

  // `owner` holds a live permit: push its expiry to now + ttlMs and say true. Else false.
  async renew(key, owner, ttlMs) {
    check(key, owner, ttlMs);
    const holder = this.#live(key)?.holders.get(owner);
    if (!holder) return false;
    holder.expiresAt = this.#clock.now() + ttlMs;
    return true;
  }

  // End `owner`'s permit only; the other holders keep theirs. True when it was live.
  async release(key, owner) {
    check(key, owner);
    const entry = this.#live(key);
    if (!entry?.holders.delete(owner)) return false;
    if (entry.holders.size === 0) this.#keys.delete(key);
    return true;
  }

  // Optional and advisory, for your own code (main.mjs reads isLocked): the engine never calls them.
  async isLocked(key) {
    return this.#live(key) !== undefined;
  }

  // The longest a holder of `key` still has.
  async ttl(key) {
    const entry = this.#live(key);
    if (!entry) return undefined;
    return Math.max(...[...entry.holders.values()].map((h) => h.expiresAt)) - this.#clock.now();
  }

  // Lapsed holders are deleted when next looked at, and a key with none: memory stays
  // bounded by live leases (the single token counter is why nothing else is kept per key).
  #live(key) {
    const entry = this.#keys.get(key);
    if (!entry) return undefined;
    const now = this.#clock.now();
    for (const [owner, holder] of entry.holders) if (holder.expiresAt <= now) entry.holders.delete(owner);
    if (entry.holders.size > 0) return entry;
    this.#keys.delete(key);
    return undefined;
  }
}

// Bad arguments are refused, naming what was wrong (the engine never sends them; your own code might).
function check(key, owner, ttlMs) {
  if (typeof key !== 'string' || key === '') throw new TypeError(`key must be a non-empty string, got ${String(key)}`);
  if (typeof owner !== 'string' || owner === '') throw new TypeError(`owner must be a non-empty string, got ${String(owner)}`);
  if (ttlMs !== undefined && !(typeof ttlMs === 'number' && ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new RangeError(`ttlMs must be a positive, finite number of milliseconds, got ${String(ttlMs)}`);
  }
}

// acquire's options: { queue, limit, weight }, limit and weight both or neither (a plain lock).
function permitsOf(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object, got ${String(options)}`);
  const { limit = 1, weight = 1 } = options;
  if (!Number.isInteger(limit) || limit < 1 || limit > 2147483647) throw new RangeError(`options.limit must be an integer from 1 to 2147483647, got ${String(limit)}`);
  if (!Number.isInteger(weight) || weight < 1 || weight > limit) throw new RangeError(`options.weight must be an integer from 1 to the limit, got ${String(weight)}`);
  if ((options.limit === undefined) !== (options.weight === undefined)) throw new TypeError('options.limit and options.weight come together');
  return { limit, weight };
}
