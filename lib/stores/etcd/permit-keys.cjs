'use strict';
/**
 * The keys of an EtcdLockStore's permits (see "Permits" at the top of index.cjs), and
 * who of a key's queue holds. A plain lock's keys are `${lock}${lease ID in hex}`; a
 * permit's are `${lock}~${limit}/${lease ID in hex}:${weight}`. '~' sorts after every
 * hex digit, so the keys of each limit lie in a range of their own: a transaction
 * compares the other ranges empty, and keys of two limits never coexist on a lock.
 *
 * In create-revision order, a key holds iff the weights of the keys up to it, its own
 * included, fit in the limit: FIFO (a request that does not fit blocks those behind
 * it), and a key that holds keeps holding while keys ahead of it go.
 */

const PERMITS = '~';

/** Where the keys of `limit` start under `lock` (a Buffer ending in '/'). */
function permitRange(lock, limit) {
  return Buffer.concat([lock, Buffer.from(`${PERMITS}${limit}/`)]);
}

/** Where the permit keys (of every limit) start under `lock`: plain keys sort before. */
function permitsStart(lock) {
  return Buffer.concat([lock, Buffer.from(PERMITS)]);
}

/** The key of a permit of `weight` out of `limit`, under `lock`, for lease `leaseId`. */
function permitName(lock, limit, weight, leaseId) {
  return Buffer.concat([permitRange(lock, limit), Buffer.from(`${BigInt(leaseId).toString(16)}:${weight}`)]);
}

const SHAPE = /^~(\d+)\/[0-9a-f]+:(\d+)$/;

/** The `{ limit, weight }` of the key `name` (a Buffer) under `lock`: 1 and 1 for a plain key. */
function keyPermits(lock, name) {
  const rest = name.subarray(lock.length).toString();
  const m = SHAPE.exec(rest);
  return m === null ? { limit: 1, weight: 1 } : { limit: Number(m[1]), weight: Number(m[2]) };
}

/**
 * Where the key `own` stands in `kvs` (a key's queue, oldest first, every key of its
 * limit): `{ rev, fits, pred, predFits, after }` (its create revision, whether it holds,
 * the key just before it and whether that one holds, whether keys follow), or undefined
 * when `own` is not there.
 */
function standing(kvs, lock, own, limit) {
  let taken = 0;
  let pred;
  let predFits = true;
  for (let i = 0; i < kvs.length; i++) {
    const kv = kvs[i];
    taken += keyPermits(lock, kv.key).weight;
    const fits = taken <= limit;
    if (kv.key.equals(own)) {
      return { rev: Number(kv.create_revision), fits, pred, predFits, after: i < kvs.length - 1 };
    }
    pred = kv.key;
    predFits = fits;
  }
  return undefined;
}

/** The weights of `kvs` (keys under `lock`), summed. */
function taken(kvs, lock) {
  let sum = 0;
  for (const kv of kvs) sum += keyPermits(lock, kv.key).weight;
  return sum;
}

module.exports = { permitRange, permitsStart, permitName, keyPermits, standing, taken };
