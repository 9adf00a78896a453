'use strict';
// The checks every store's `list({ prefix, limit })` makes, in one place.

const { describe, checkOptionNames } = require('./describe.cjs');

/** `{ prefix = '', limit = Infinity }`, checked; throws TypeError/RangeError naming the option. */
function checkListOptions(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`options must be an object like { prefix, limit }, got ${describe(options)}`);
  }
  checkOptionNames(options, ['prefix', 'limit'], 'list');
  const { prefix = '', limit = Infinity } = options;
  if (typeof prefix !== 'string') throw new TypeError(`prefix must be a string, got ${describe(prefix)}`);
  if (typeof limit !== 'number' || Number.isNaN(limit)) {
    throw new TypeError(`limit must be a number of keys, got ${describe(limit)}`);
  }
  if (limit !== Infinity && (!Number.isSafeInteger(limit) || limit < 0)) {
    throw new RangeError(`limit must be a non-negative integer (or Infinity), got ${describe(limit)}`);
  }
  return { prefix, limit };
}

module.exports = { checkListOptions };
