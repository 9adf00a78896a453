/**
 * `limit` and `weight` on `TabLockStore` (./index.mjs): counted permits out of Web Locks.
 *
 * - Each holder of a permit holds a Web Lock of its own, its *permit lock*, whose name
 *   says the key, the limit, the weight and the owner (permitName). The browser lets it
 *   go when the holder's tab or worker goes away, so `navigator.locks.query()` counts
 *   exactly the live permits of the origin.
 * - A permit is granted only by an agent holding the key's own Web Lock (`${prefix}:${key}`,
 *   the lock plain and shared/exclusive leases hold) in exclusive mode, its *gate*: it
 *   counts the permit locks held, and takes its own permit lock before it lets the gate
 *   go. So counting and taking are one step across the origin: the weights held never
 *   sum past the limit. Tokens are issued under the gate too, so they rise.
 * - A waiter asks for the gate in the browser's queue (first come, first served); the
 *   one holding it and not fitting waits, still holding it, for a permit lock to be let
 *   go (it asks for those locks: the browser grants one when its holder is gone), then
 *   counts again. Nobody behind it is granted meanwhile: a heavy head is not overtaken.
 * - A plain or shared/exclusive lease granted the key's lock checks that no permit lock
 *   of the key is held (./index.mjs): the kinds never mix.
 * Permit lock names start with `${prefix}\u0001`, never `${prefix}:`: `list` and other
 * releases' stores read them as no key of theirs.
 */

const SEPARATOR = '\u0001permit:';

/** The name of `owner`'s permit lock of `weight` on `key` of `limit`, under `prefix`. */
export function permitName(prefix, key, limit, weight, owner) {
  return `${prefix}${SEPARATOR}${JSON.stringify([key, limit, weight, owner])}`;
}

/** `{ key, limit, weight, owner }` of a permit lock name under `prefix`, or undefined for another name. */
export function parsePermitName(prefix, name) {
  if (!name.startsWith(prefix + SEPARATOR)) return undefined;
  try {
    const [key, limit, weight, owner] = JSON.parse(name.slice(prefix.length + SEPARATOR.length));
    return { key, limit, weight, owner };
  } catch {
    return undefined; // not one of ours
  }
}

/** The permit locks of `key` held in the origin (from a `query()` answer's `held`): `{ name, limit, weight }`. */
export function permitsHeld(held, prefix, key) {
  const found = [];
  for (const lock of held) {
    const permit = parsePermitName(prefix, lock.name);
    if (permit?.key === key) found.push({ name: lock.name, limit: permit.limit, weight: permit.weight });
  }
  return found;
}

/**
 * Resolves the name of the first of the permit locks `names` let go by its holder (the
 * browser grants it to this request, which lets it go at once); the others' requests
 * are withdrawn. Rejects with `signal`'s reason when it aborts first. A query right
 * after may still show that lock held: the caller counts it out by name, which is sound
 * while it holds the key's lock (no permit lock is taken meanwhile, that one included).
 */
export function somePermitReturns(locks, names, signal) {
  return new Promise((resolve, reject) => {
    const asking = new AbortController();
    const settle = () => {
      signal?.removeEventListener('abort', aborted);
      asking.abort();
    };
    const aborted = () => {
      settle();
      reject(signal.reason);
    };
    if (signal?.aborted) return aborted();
    signal?.addEventListener('abort', aborted, { once: true });
    for (const name of names) {
      locks
        .request(name, { signal: asking.signal }, () => {
          settle();
          resolve(name);
        })
        .catch(() => {}); // withdrawn
    }
  });
}
