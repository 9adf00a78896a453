'use strict';
// The Redis names of a lock key (see "Keys" at the top of index.cjs), and reading the
// scripts' replies.
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
