// A lock store over a Map: the whole LockStore contract in a few lines. The engine
// (waiting, polling, renewal, loss detection, fencing) comes for free; the store only
// keeps leases. Swap the Map for your own backend, keeping each method atomic per key.
// Time is this process's monotonic clock, or the `clock` given (a FakeTimeProvider in
// tests); a shared backend should use its own clock.

export class MapLockStore {
  #leases = new Map(); // key -> { owner, expiresAt }
  #lastToken = 0; // one counter for every key: tokens increase per key (and overall)
  #clock;

  constructor({ clock = performance } = {}) {
    this.#clock = clock;
  }

  // No live lease on `key`: take it for ttlMs, return a new, larger fencing token.
  // Held (by anyone, the same owner included): undefined.
  async acquire(key, owner, ttlMs) {
    check(key, owner, ttlMs);
    const lease = this.#live(key);
    if (lease) return undefined;
    this.#leases.set(key, { owner, expiresAt: this.#clock.now() + ttlMs });
    this.#lastToken += 1;
    return { fencingToken: this.#lastToken };
  }

  // The live lease is `owner`'s: push its expiry to now + ttlMs and say true. Else false.
  async renew(key, owner, ttlMs) {
    check(key, owner, ttlMs);
    const lease = this.#live(key);
    if (!lease || lease.owner !== owner) return false;
    lease.expiresAt = this.#clock.now() + ttlMs;
    return true;
  }

  // End the lease only if it is `owner`'s. True when it was live.
  async release(key, owner) {
    check(key, owner);
    const lease = this.#live(key);
    if (!lease || lease.owner !== owner) return false;
    this.#leases.delete(key);
    return true;
  }

  // Optional and advisory, for your own code (main.mjs reads isLocked): the engine never calls them.
  async isLocked(key) {
    return this.#live(key) !== undefined;
  }

  async ttl(key) {
    const lease = this.#live(key);
    return lease ? lease.expiresAt - this.#clock.now() : undefined;
  }

  // Lapsed leases are deleted when next looked at: memory stays bounded by live leases
  // (the single token counter is why nothing else needs to be kept per key).
  #live(key) {
    const lease = this.#leases.get(key);
    if (lease && lease.expiresAt <= this.#clock.now()) {
      this.#leases.delete(key);
      return undefined;
    }
    return lease;
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
