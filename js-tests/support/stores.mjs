// Small JS stores that record every call with the fake time it was made at. Their
// default behaviour is a correct in-memory store; tests override single methods.

export function recordingStore(clock, overrides = {}) {
  const calls = [];
  const leases = new Map();
  let lastToken = 0;
  const live = (key) => {
    const lease = leases.get(key);
    return lease && lease.expires > clock.now() ? lease : undefined;
  };
  const base = {
    async acquire(key, owner, ttlMs) {
      if (live(key)) return undefined;
      leases.set(key, { owner, expires: clock.now() + ttlMs });
      lastToken += 1;
      return { fencingToken: lastToken };
    },
    async renew(key, owner, ttlMs) {
      const lease = live(key);
      if (!lease || lease.owner !== owner) return false;
      lease.expires = clock.now() + ttlMs;
      return true;
    },
    async release(key, owner) {
      const lease = leases.get(key);
      if (lease && lease.owner === owner) leases.delete(key);
    },
  };
  const store = { calls, leases, base };
  for (const method of ['acquire', 'renew', 'release']) {
    store[method] = (...args) => {
      calls.push({ method, at: clock.now(), key: args[0], owner: args[1], ttl: args[2] });
      return (overrides[method] ?? base[method])(...args);
    };
  }
  store.times = (method) => calls.filter((c) => c.method === method).map((c) => c.at);
  return store;
}
