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

/**
 * An in-memory store that grants on release (README, "custom stores"), to drive the
 * engine's granting path without Redis. Each call takes effect when it is made (as a
 * script would on a server); its answer comes back once `gate(method, key, owner)`
 * resolves (by default at once), so a test can hold an answer back while a release hands
 * the lease over. The rules it follows:
 * - `acquire(key, owner, ttl, { queue: true })` on a held key queues the owner (once,
 *   keeping its place); a try on a lease a release handed to that owner is answered with
 *   it, counted again from the try.
 * - `release` by the holder hands the lease to the first queued owner (a new, larger
 *   token, the ttl that owner asked for) and offers `{ owner, fencingToken, age }` to the
 *   key's listeners until one claims it (returns true); with nobody queued it announces
 *   the release (a listener called without a grant). `release` by an owner that does not
 *   hold the lease takes it out of the queue (a waiter that gave up), unless the option
 *   `dequeueOnRelease` is false (a store that leaves it queued until its grant is released).
 * - A grant nobody claims is released (and passes on), unless the owner's try was
 *   answered with it already, or that owner's try on the key is still unanswered: the
 *   try is then answered with it instead of "held", and a try that fails releases it.
 *
 * Options: `deliver` ('sync': grants and announcements are offered inside `release`;
 * 'microtask' or 'macrotask': later, as a message would come), `age` (false: grants
 * leave it out), `subscribe` / `unsubscribe` (replace those behaviours: a test passes a
 * `subscribe` that throws, or an `unsubscribe` that removes nothing).
 * `grants` records each grant and what became of it: 'claimed', 'answered' (the try had
 * it already), 'kept' (for an unanswered try), 'released'.
 */
export function grantingStore(clock, options = {}) {
  const { deliver = 'sync', age: withAge = true, dequeueOnRelease = true } = options;
  const calls = [];
  const grants = [];
  const leases = new Map(); // key -> { owner, token, expires }
  const queues = new Map(); // key -> [{ owner, ttl }] in arrival order
  const listeners = new Map(); // key -> Set of { onReleased }
  const unanswered = new Map(); // owner -> { key, kept }: queueing tries not answered yet
  const answeredWith = new Map(); // owner -> token: a try answered with a lease handed over
  let lastToken = 0;

  const live = (key) => {
    const lease = leases.get(key);
    if (lease && lease.expires > clock.now()) return lease;
    if (lease) leases.delete(key);
    return undefined;
  };
  const later = (fn) => {
    if (deliver === 'sync') fn();
    else if (deliver === 'microtask') queueMicrotask(fn);
    else setImmediate(fn);
  };
  const dequeue = (key, owner) => {
    const queue = queues.get(key);
    const at = queue?.findIndex((q) => q.owner === owner) ?? -1;
    if (at >= 0) queue.splice(at, 1);
    if (queue?.length === 0) queues.delete(key);
  };

  /** Ends the live lease of `key` (it was `owner`'s); the first queued owner is handed a new one. */
  function handOver(key) {
    leases.delete(key);
    const next = queues.get(key)?.shift();
    if (queues.get(key)?.length === 0) queues.delete(key);
    if (next === undefined) {
      later(() => {
        for (const entry of [...(listeners.get(key) ?? [])]) {
          try {
            entry.onReleased();
          } catch {
            // a listener's failure is its own
          }
        }
      });
      return;
    }
    const token = ++lastToken;
    const grantedAt = clock.now();
    leases.set(key, { owner: next.owner, token, expires: grantedAt + next.ttl });
    later(() => offer(key, next.owner, token, grantedAt));
  }

  function offer(key, owner, token, grantedAt) {
    const record = { key, owner, token, outcome: undefined };
    grants.push(record);
    const lease = live(key);
    // Released, lapsed or answered meanwhile and released again: nothing left to offer.
    if (!lease || lease.owner !== owner || lease.token !== token) {
      record.outcome = 'gone';
      return;
    }
    const grant = { owner, fencingToken: token };
    if (withAge) grant.age = clock.now() - grantedAt;
    for (const entry of [...(listeners.get(key) ?? [])]) {
      try {
        if (entry.onReleased(grant) === true) {
          record.outcome = 'claimed';
          return;
        }
      } catch {
        // a listener that throws does not claim
      }
    }
    if (answeredWith.get(owner) === token) {
      record.outcome = 'answered';
      return;
    }
    const pending = unanswered.get(owner);
    if (pending !== undefined && pending.key === key) {
      pending.kept = token;
      record.outcome = 'kept';
      return;
    }
    // A listener may have released it meanwhile (and the key gone to the next owner):
    // like a release, an unclaimed grant ends only its own owner's lease.
    const still = live(key);
    if (!still || still.owner !== owner || still.token !== token) {
      record.outcome = 'gone';
      return;
    }
    record.outcome = 'released';
    handOver(key);
  }

  const gate = options.gate ?? (() => undefined);

  const store = {
    calls,
    grants,
    leases,
    queues,
    listeners,
    unanswered,
    grantsOnRelease: true,
    async acquire(key, owner, ttlMs, opts) {
      calls.push({ method: 'acquire', at: clock.now(), key, owner, ttl: ttlMs, queue: opts?.queue });
      const lease = live(key);
      let result;
      if (lease === undefined) {
        dequeue(key, owner);
        const token = ++lastToken;
        leases.set(key, { owner, token, expires: clock.now() + ttlMs });
        result = { fencingToken: token };
      } else if (lease.owner === owner && opts !== undefined) {
        // A release handed it to this owner (whether or not a listener claimed the grant:
        // the engine asks again for a grant it cannot date): its try takes it, counted
        // from now.
        lease.expires = clock.now() + ttlMs;
        answeredWith.set(owner, lease.token);
        result = { fencingToken: lease.token };
      } else if (opts?.queue === true) {
        const queue = queues.get(key) ?? [];
        if (!queue.some((q) => q.owner === owner)) queue.push({ owner, ttl: ttlMs });
        queues.set(key, queue);
      }
      const queueing = opts?.queue === true && result === undefined;
      if (queueing) unanswered.set(owner, { key, kept: undefined });
      try {
        await gate('acquire', key, owner);
      } catch (error) {
        const pending = unanswered.get(owner);
        unanswered.delete(owner);
        if (pending?.kept !== undefined) store.dropGrant(key, owner, pending.kept);
        throw error;
      }
      if (!queueing) return result;
      const pending = unanswered.get(owner);
      unanswered.delete(owner);
      if (pending?.kept === undefined) return undefined;
      const held = live(key);
      if (!held || held.owner !== owner || held.token !== pending.kept) return undefined;
      answeredWith.set(owner, pending.kept);
      return { fencingToken: pending.kept };
    },
    async renew(key, owner, ttlMs) {
      calls.push({ method: 'renew', at: clock.now(), key, owner, ttl: ttlMs });
      const lease = live(key);
      const mine = lease !== undefined && lease.owner === owner;
      if (mine) lease.expires = clock.now() + ttlMs;
      await gate('renew', key, owner);
      return mine;
    },
    async release(key, owner) {
      calls.push({ method: 'release', at: clock.now(), key, owner });
      answeredWith.delete(owner);
      const lease = live(key);
      const mine = lease !== undefined && lease.owner === owner;
      if (mine) handOver(key);
      else if (dequeueOnRelease) dequeue(key, owner);
      await gate('release', key, owner);
      return mine;
    },
    /** Releases a grant kept for a try that failed, if it is still that owner's. */
    dropGrant(key, owner, token) {
      const lease = live(key);
      if (lease && lease.owner === owner && lease.token === token) handOver(key);
    },
    subscribe(key, onReleased) {
      if (options.subscribe) return options.subscribe(key, onReleased);
      const entry = { onReleased };
      const set = listeners.get(key) ?? new Set();
      set.add(entry);
      listeners.set(key, set);
      return () => {
        if (options.unsubscribe) return options.unsubscribe(key, onReleased);
        set.delete(entry);
        if (set.size === 0 && listeners.get(key) === set) listeners.delete(key);
      };
    },
    async isLocked(key) {
      return live(key) !== undefined;
    },
    times: (method) => calls.filter((c) => c.method === method).map((c) => c.at),
  };
  return store;
}
