'use strict';
// The requests of `EtcdLockStore` (lib/stores/etcd/index.cjs): etcd's enum values, key
// names and ranges, and reading etcd's answers (its argument checks are the shared ones,
// lib/stores/shared/checks.cjs).


// etcd's enum values (rpc.proto), sent as numbers.
const EQUAL = 0; // Compare.result
const CREATE = 1; // Compare.target: the create revision
const MOD = 2; // Compare.target: the last modification's revision
const VALUE = 3; // Compare.target
const LESS = 2; // Compare.result
const ASCEND = 1; // RangeRequest.sort_order
const DESCEND = 2;
const BY_CREATE = 2; // RangeRequest.sort_target

/**
 * A request that timed out, or whose member went away, or that the client did not send
 * because each of its hosts failed just before (its circuit breakers, open for a few
 * seconds): it may succeed if sent again.
 */
function isTransient(err) {
  const code = err?.code ?? err?.cause?.code;
  if (code === 4 || code === 14) return true; // DEADLINE_EXCEEDED, UNAVAILABLE
  return /^(GRPC(DeadlineExceeded|Unavailable)|BrokenCircuit)Error$/.test(err?.constructor?.name ?? '');
}

/** etcd leases count whole seconds: the lock's ttl, rounded up. */
function leaseSeconds(ttlMs) {
  return Math.ceil(ttlMs / 1000);
}

function enc(key) {
  return key.replace(/[%/]/g, (c) => (c === '%' ? '%25' : '%2F'));
}

/** The end of the range of keys that start with `prefix` (which ends with '/'). */
function rangeEnd(prefix) {
  const end = Buffer.from(prefix);
  end[end.length - 1] += 1;
  return end;
}

function isEtcdClient(client) {
  return (
    client != null &&
    typeof client === 'object' &&
    typeof client.watchClient?.watch === 'function' &&
    typeof client.kv?.txn === 'function' &&
    typeof client.kv?.range === 'function' &&
    typeof client.leaseClient?.leaseGrant === 'function' &&
    typeof client.leaseClient?.leaseKeepAlive === 'function'
  );
}

function revisionOf(reply, what) {
  const rev = Number(reply?.header?.revision);
  if (!Number.isSafeInteger(rev) || rev <= 0) {
    throw new Error(`EtcdLockStore: unexpected answer to ${what}: no revision`);
  }
  return rev;
}

function rangeOf(reply, i) {
  return reply.responses[i].response_range.kvs;
}

/** The first key under the prefix by create revision (the holder's). */
function firstRange(prefix, end) {
  return { request_range: { key: prefix, range_end: end, sort_order: ASCEND, sort_target: BY_CREATE, limit: 1, keys_only: true } };
}

/** Every key from `start` to `end` (keys only), oldest first: a permit key's queue. */
function allRange(start, end) {
  return { request_range: { key: start, range_end: end, sort_order: ASCEND, sort_target: BY_CREATE, keys_only: true } };
}

/** A compare that holds when no key lies from `start` to `end`. */
function noKeys(start, end) {
  return { key: start, range_end: end, target: CREATE, result: EQUAL, create_revision: 0 };
}

/** The last two keys under the prefix by create revision. */
function lastTwoRange(prefix, end) {
  return { request_range: { key: prefix, range_end: end, sort_order: DESCEND, sort_target: BY_CREATE, limit: 2, keys_only: true } };
}

module.exports = {
  EQUAL,
  CREATE,
  MOD,
  VALUE,
  LESS,
  ASCEND,
  DESCEND,
  BY_CREATE,
  isTransient,
  leaseSeconds,
  enc,
  rangeEnd,
  isEtcdClient,
  revisionOf,
  rangeOf,
  firstRange,
  allRange,
  noKeys,
  lastTwoRange,
};
