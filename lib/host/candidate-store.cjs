'use strict';
// A JS store as a candidate sees it. Two things differ from the store itself:
// - owners carry the candidate's name (`<prefix><owner>`, the prefix empty without a
//   name): the store keeps it, every process that inspects it reads it (election-names.cjs);
// - a waiter is woken when the holder's lease runs out. Stores announce releases, not
//   lapses, and a waiter's polls back off to 1 s: after a crashed leader, the line would
//   otherwise move up to a second after its lease ended. While the engine listens on a
//   key, the view reads the holder's time left (`ttl(key)`, else `inspect(key)`) and
//   announces the key free when it has lapsed.

// After announcing a key free, look again this soon: someone else may have taken it.
const LOOK_AGAIN_MS = 50;
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Milliseconds left on `key`'s lease (undefined: free; Infinity: no expiry), or undefined when `store` cannot tell. */
function timeLeftReader(store) {
  if (typeof store.ttl === 'function') return (key) => store.ttl(key);
  if (typeof store.inspect === 'function') {
    return async (key) => {
      const holder = (await store.inspect(key))?.holders?.[0];
      return holder === undefined ? undefined : holder.ttl;
    };
  }
  return undefined;
}

/**
 * Calls `wake()` each time the lease on `key` is found to have run out, from now until
 * the returned stop function is called. Read failures only skip a look.
 */
function wakeAtLapse(timeLeft, key, wake) {
  let stopped = false;
  let timer;
  const arm = (ms) => {
    if (!stopped) timer = setTimeout(look, Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(ms))));
  };
  async function look() {
    let left;
    try {
      left = await timeLeft(key);
    } catch {
      return arm(LOOK_AGAIN_MS * 20);
    }
    if (stopped) return;
    if (left === undefined || left === null || left <= 0) {
      wake();
      return arm(LOOK_AGAIN_MS);
    }
    if (left !== Infinity) arm(left + 1);
  }
  look();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * A view of `store` that writes `prefix` before the owners it passes on and takes it off
 * the owners the store hands back (grants): the engine sees its own owners only. Every
 * other property is the store's own, its methods bound to it (private fields work).
 */
function candidateView(store, prefix) {
  const outward = (owner) => (typeof owner === 'string' ? prefix + owner : owner);
  const inward = (grant) =>
    grant !== null && typeof grant === 'object' && typeof grant.owner === 'string' && grant.owner.startsWith(prefix)
      ? { ...grant, owner: grant.owner.slice(prefix.length) }
      : grant;
  const own = {
    acquire: (key, owner, ...rest) => store.acquire(key, outward(owner), ...rest),
    renew: (key, owner, ...rest) => store.renew(key, outward(owner), ...rest),
    release: (key, owner, ...rest) => store.release(key, outward(owner), ...rest),
  };
  const timeLeft = timeLeftReader(store);
  if (typeof store.subscribe === 'function' || timeLeft !== undefined) {
    own.subscribe = (key, listener) => {
      const unsubscribe = typeof store.subscribe === 'function' ? store.subscribe(key, (grant) => listener(inward(grant))) : undefined;
      const stopLooking = timeLeft === undefined ? undefined : wakeAtLapse(timeLeft, key, () => listener());
      return () => {
        stopLooking?.();
        unsubscribe?.();
      };
    };
  }
  return new Proxy(store, {
    get(target, property) {
      if (Object.prototype.hasOwnProperty.call(own, property)) return own[property];
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

module.exports = { candidateView };
