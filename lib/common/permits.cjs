'use strict';
/**
 * Permits as a store sees them (README, "A store of your own"): `acquire`'s fourth
 * argument `{ queue, limit, weight }`, checked by the memory store (lib/host) and the
 * CommonJS stores (through lib/stores/shared/permits.cjs) alike. A lock with permits asks for `weight` of the key's
 * `limit`; a plain lock passes neither and is a key of limit 1. Shared and exclusive
 * leases reach a store as permits of SHARED_LIMIT: a reader takes 1, a writer all of them.
 * lib/stores/shared/store-support.mjs holds the same rules for the ES stores.
 */
const { describe } = require('./describe.cjs');

/** The limit of a key used with `mode`: a writer's weight, more than readers will ever be. */
const SHARED_LIMIT = 2147483647;

// The answers for a plain lock (no permits), shared: every acquire asks for one of them.
const PLAIN = Object.freeze({ queue: false, limit: undefined, weight: undefined });
const PLAIN_QUEUED = Object.freeze({ queue: true, limit: undefined, weight: undefined });

/**
 * `acquire`'s options, checked: `queue` (a boolean), and `limit` and `weight` together
 * (integers, 1 <= weight <= limit <= SHARED_LIMIT), both undefined for a plain lock.
 */
function acquireOptions(options) {
  if (options === undefined) return PLAIN;
  if (options === null || typeof options !== 'object' || (options.queue !== undefined && typeof options.queue !== 'boolean')) {
    throw new TypeError(`options must be an object like { queue: true }, got ${describe(options)}`);
  }
  const { limit, weight } = options;
  if (limit === undefined && weight === undefined) return options.queue === true ? PLAIN_QUEUED : PLAIN;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > SHARED_LIMIT) {
    throw new RangeError(`options.limit must be an integer from 1 to ${SHARED_LIMIT}, got ${describe(limit)}`);
  }
  if (!Number.isSafeInteger(weight) || weight < 1 || weight > limit) {
    throw new RangeError(`options.weight must be an integer from 1 to the limit (${limit}), got ${describe(weight)}`);
  }
  return { queue: options.queue === true, limit, weight };
}

/** How `inspect` shows a holder's permits: its weight, and its mode on a key used with modes. */
function permitsShown(limit, weight) {
  if (limit !== SHARED_LIMIT) return { weight };
  return { weight, mode: weight === SHARED_LIMIT ? 'exclusive' : 'shared' };
}

module.exports = { SHARED_LIMIT, acquireOptions, permitsShown };
