// Stores for the store kit's own tests: a correct one on a fake clock, and the ways a
// store can break the LockStore contract, one flag each.

/**
 * A correct store on `clock` unless `broken` names a fault:
 * `renewAnyOwner`, `releaseAnyOwner`, `reentrant`, `grantsHeldKeys`, `tokensGoBack`, `neverExpires`,
 * `noInputChecks`, `acquireShape` (answers { token }), `renewShape` (answers 'yes'),
 * `ignoresCarriedToken` (declares localHandoff but grants below a carried token).
 */
export function kitStore(clock, broken = {}) {
  const leases = new Map(); // key -> { owner, expires }
  const last = new Map(); // key -> last token
  const live = (key) => {
    const lease = leases.get(key);
    return lease && (broken.neverExpires || lease.expires > clock.now()) ? lease : undefined;
  };
  const check = (key, owner, ttl) => {
    if (broken.noInputChecks) return;
    if (typeof key !== 'string' || key === '') throw new TypeError(`key must be a non-empty string, got ${key}`);
    if (typeof owner !== 'string' || owner === '') throw new TypeError(`owner must be a non-empty string, got ${owner}`);
    if (ttl !== undefined && !(typeof ttl === 'number' && ttl > 0 && ttl < Infinity)) throw new RangeError(`ttlMs must be positive, got ${ttl}`);
  };
  const store = {
    async acquire(key, owner, ttl) {
      check(key, owner, ttl);
      const lease = live(key);
      if (lease && !broken.grantsHeldKeys && !(broken.reentrant && lease.owner === owner)) return undefined;
      const previous = last.get(key) ?? (broken.localHandoff ? clock.now() * 1000 : 0);
      const token = broken.tokensGoBack ? Math.max(1, 100 - previous) : previous + 1;
      last.set(key, token);
      leases.set(key, { owner, expires: clock.now() + ttl });
      return broken.acquireShape ? { token } : { fencingToken: token };
    },
    async renew(key, owner, ttl, carried) {
      check(key, owner, ttl);
      const lease = live(key);
      if (!lease || (lease.owner !== owner && !broken.renewAnyOwner)) return broken.renewShape ? 'no' : false;
      lease.expires = clock.now() + ttl;
      if (carried && !broken.ignoresCarriedToken) last.set(key, Math.max(last.get(key), carried.fencingToken));
      return broken.renewShape ? 'yes' : true;
    },
    async release(key, owner, carried) {
      check(key, owner);
      const lease = live(key);
      if (!lease || (lease.owner !== owner && !broken.releaseAnyOwner)) return false;
      if (carried && !broken.ignoresCarriedToken) last.set(key, Math.max(last.get(key), carried.fencingToken));
      leases.delete(key);
      return true;
    },
  };
  if (broken.localHandoff) store.localHandoff = 0;
  return store;
}
