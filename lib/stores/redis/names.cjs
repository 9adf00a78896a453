'use strict';
/**
 * The Redis names of a lock key, and reading the scripts' replies (RedisLockStore,
 * index.cjs).
 *
 * A lock key `k` uses these Redis names, all in one hash slot:
 *   lease  `${prefix}:{${enc(k)}}`           value: the owner, expiry: the lease (a
 *                                            hash when held with permits: permit-scripts.cjs)
 *   token  `${prefix}:{${enc(k)}}:token`     the last fencing token issued for `k`
 *   queue  `${prefix}:{${enc(k)}}:queue`     owners waiting for `k`, in arrival order
 *   waiters `${prefix}:{${enc(k)}}:waiters`  owner -> "<valid until> <ttl> <queued since> <channel>"
 *   channel `${prefix}:{${enc(k)}}:released` published when the lease is released and
 *                                            nobody queued takes it over
 * and each store has a channel of its own, `${prefix}:grants:<random id>`, for grants.
 * An ioredis client's `keyPrefix` comes first in each of a key's names, its channel
 * included: a store with prefix `p` on a client with keyPrefix `app:` shares leases,
 * queues and announcements with a store with prefix `app:p` on a client without one.
 * The grant channel goes to the scripts as an argument, not a key, so it is used as it
 * is, without the keyPrefix.
 * Redis Cluster hashes only the text between the first `{` and the next `}`. The prefix
 * may not contain braces, and `enc` percent-encodes `%`, `{` and `}` (as `%25`, `%7B`,
 * `%7D`), so the user's text can never close the tag early nor open it elsewhere, and
 * distinct keys never share a name ('a}', 'a', '{a}' become `{a%7D}`, `{a}`, `{%7Ba%7D}`).
 * Lone UTF-16 surrogates, which every client would send as the same U+FFFD bytes, are
 * encoded as `%uD800`-style escapes, so `enc` is injective on all JS strings. Everything
 * else (spaces, newlines, `*`, emoji, any Unicode) is kept as is: Redis names are binary
 * safe, and the names stay readable in `redis-cli`.
 */
const { describe } = require('../../common/describe.cjs');

const ESCAPED = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function escapeChar(ch) {
  if (ch === '%') return '%25';
  if (ch === '{') return '%7B';
  if (ch === '}') return '%7D';
  return `%u${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The hash-tag body for a lock key: injective, and free of `{` and `}`. */
function encodeKey(key) {
  return key.replace(ESCAPED, escapeChar);
}

/** The Redis names of a lease's key, from the lease's name, in script order. */
function keysOfLease(lease) {
  return [lease, `${lease}:token`, `${lease}:queue`, `${lease}:waiters`];
}

function toToken(reply) {
  const n = typeof reply === 'number' ? reply : Number(reply);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new Error(`RedisLockStore: unexpected reply from the acquire script: ${describe(reply)}`);
  }
  return n;
}

function toFlag(reply, method) {
  const n = Number(reply);
  if (n === 1) return true;
  if (n === 0) return false;
  throw new Error(`RedisLockStore: unexpected reply from the ${method} script: ${describe(reply)}`);
}

/**
 * A grant message, `<token> <owner's length in bytes> <owner><lease name>`, as
 * `{ fencingToken, owner, name }`; undefined when it is not one.
 */
function parseGrant(message) {
  const head = /^(\d+) (\d+) /.exec(message);
  if (head === null) return undefined;
  const fencingToken = Number(head[1]);
  let rest = message.slice(head[0].length);
  // The owner's length is in bytes: cut by bytes when the text is not ASCII.
  const length = Number(head[2]);
  if (Buffer.byteLength(rest) === rest.length) return { fencingToken, owner: rest.slice(0, length), name: rest.slice(length) };
  rest = Buffer.from(rest);
  return { fencingToken, owner: rest.subarray(0, length).toString(), name: rest.subarray(length).toString() };
}

module.exports = { encodeKey, keysOfLease, toToken, toFlag, parseGrant };
