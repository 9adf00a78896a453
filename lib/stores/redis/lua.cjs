'use strict';
// What the Lua scripts of `RedisLockStore` share: how a script is named (its SHA-1, for
// EVALSHA) and the times they keep names for. scripts.cjs (plain leases),
// permit-scripts.cjs (permits) and inspect.cjs build on it.

const { createHash } = require('node:crypto');

/** @param {string} source */
function script(source) {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/** Fencing tokens are kept at least this long after the last grant of their key. */
const MIN_TOKEN_RETENTION_MS = 60_000;

/** How long a queued waiter stays in the queue without asking again (the engine asks
 * at least every second while it waits). */
const QUEUE_ENTRY_MS = 3_000;

module.exports = { script, MIN_TOKEN_RETENTION_MS, QUEUE_ENTRY_MS };
