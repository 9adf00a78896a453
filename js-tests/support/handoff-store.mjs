// An in-process JS store that declares `localHandoff` (README, "A store of your own"):
// each call takes effect when made, on `clock` (a FakeTimeProvider or anything with
// now() in ms). Grants are max(floor + 1, clock in µs); a renew or release carrying
// `{ fencingToken }` raises the key's floor to it. Options: `turn` (the localHandoff, ms;
// undefined: no local handoff), `announce` (subscribe: a release wakes the key's
// listeners). `leases` is open for tests to read: key -> { owner, expires, token }.

export function handoffStore(clock, { turn = 10, announce = false } = {}) {
  const leases = new Map();
  const floors = new Map();
  const listeners = new Map();
  const live = (key) => {
    const lease = leases.get(key);
    return lease && lease.expires > clock.now() ? lease : undefined;
  };
  const raise = (key, options) => {
    const token = options?.fencingToken;
    if (typeof token === 'number') floors.set(key, Math.max(floors.get(key) ?? 0, token));
  };
  const announceRelease = (key) => {
    for (const listener of [...(listeners.get(key) ?? [])]) setImmediate(() => listener());
  };
  const store = {
    leases,
    async acquire(key, owner, ttlMs) {
      if (live(key)) return undefined;
      const token = Math.max((floors.get(key) ?? 0) + 1, Math.floor(clock.now() * 1_000));
      floors.set(key, token);
      leases.set(key, { owner, expires: clock.now() + ttlMs, token });
      return { fencingToken: token };
    },
    async renew(key, owner, ttlMs, options) {
      raise(key, options);
      const lease = live(key);
      if (!lease || lease.owner !== owner) return false;
      lease.expires = clock.now() + ttlMs;
      return true;
    },
    async release(key, owner, options) {
      raise(key, options);
      const lease = live(key);
      if (!lease || lease.owner !== owner) return false;
      leases.delete(key);
      if (announce) announceRelease(key);
      return true;
    },
  };
  if (turn !== undefined) Object.defineProperty(store, 'localHandoff', { value: turn, enumerable: true });
  if (announce) {
    store.subscribe = (key, onReleased) => {
      let set = listeners.get(key);
      if (!set) listeners.set(key, (set = new Set()));
      set.add(onReleased);
      return () => {
        set.delete(onReleased);
        if (set.size === 0) listeners.delete(key);
      };
    };
  }
  return store;
}
