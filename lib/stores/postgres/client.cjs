'use strict';
// What a PostgresLockStore needs to know of the `pg` objects it is given: their shape
// (a Pool, something queryable), a Pool's end, the rows of an answer, and the checks of
// the text it sends (keys, owners, identifiers).
const { describe } = require('../../common/describe.cjs');
const { checkWellFormed } = require('../../common/well-formed.cjs');
const { checkText: checkWellFormedText } = require('../shared/checks.cjs');

function noop() {}

/**
 * Keys and owners: non-empty strings that PostgreSQL `text` can hold (no U+0000), and
 * well-formed UTF-16 (`pg` sends a lone surrogate as U+FFFD: distinct keys would share
 * a row).
 */
function checkText(name, value) {
  if (typeof value === 'string' && value.includes('\u0000')) {
    throw new TypeError(`${name} must not contain the character U+0000 (PostgreSQL text cannot store it)`);
  }
  checkWellFormedText(name, value);
}

/** A table or schema name: used as a quoted identifier, so any text that fits one. */
function checkIdentifier(name, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
  if (value.includes('\u0000')) throw new TypeError(`${name} must not contain the character U+0000`);
  // Two names that differ only in a lone surrogate would name one table.
  checkWellFormed(value, name);
  if (Buffer.byteLength(value, 'utf8') > 63) {
    throw new RangeError(`${name} must be at most 63 bytes long (a PostgreSQL identifier), got ${describe(value)}`);
  }
}

function isQueryable(value) {
  return value != null && (typeof value === 'object' || typeof value === 'function') && typeof value.query === 'function';
}

/**
 * A `pg.Pool` (or a pool built on pg-pool): it exposes the client class it builds its
 * connections with (`Client`) and the settings it builds them from (`options`).
 */
function isPool(client) {
  return (
    'totalCount' in client &&
    'idleCount' in client &&
    typeof client.Client === 'function' &&
    client.options != null &&
    typeof client.options === 'object'
  );
}

/**
 * The stores watching each Pool for its end: one 'remove' listener per pool, however
 * many stores share it. pg-pool has no 'end' event; `end()` sets `ending` and removes
 * its idle clients (and each busy one as it comes back), emitting 'remove' for each.
 */
const poolEndWatchers = new WeakMap();

/** Calls `onEnd` when `pool` is being ended; returns a function that stops it. */
function watchPoolEnd(pool, onEnd) {
  if (typeof pool.on !== 'function') return noop;
  let watchers = poolEndWatchers.get(pool);
  if (watchers === undefined) {
    watchers = new Set();
    poolEndWatchers.set(pool, watchers);
    pool.on('remove', () => {
      if (pool.ending !== true) return;
      for (const watcher of [...watchers]) watcher();
    });
  }
  const watcher = () => onEnd();
  watchers.add(watcher);
  return () => watchers.delete(watcher);
}

function toToken(reply) {
  const n = typeof reply === 'number' ? reply : Number(reply);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new Error(`PostgresLockStore: unexpected token from the acquire statement: ${describe(reply)}`);
  }
  return n;
}

function isSerializationFailure(err) {
  return err != null && err.code === '40001';
}

function rowsOf(result, method) {
  const rows = result == null ? undefined : result.rows;
  if (!Array.isArray(rows)) {
    throw new Error(`PostgresLockStore: the client's query() did not resolve to { rows: [...] } for ${method}`);
  }
  return rows;
}

module.exports = { noop, checkText, checkIdentifier, isQueryable, isPool, watchPoolEnd, toToken, isSerializationFailure, rowsOf };
