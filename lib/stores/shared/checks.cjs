'use strict';
/**
 * The argument checks every CommonJS store makes, once: keys and owners, ttls, the
 * `subscribe` listener, `acquire`'s `{ queue }` and the `{ fencingToken }` a renew or
 * release carries. lib/stores/shared/store-support.mjs holds the same rules for the ES
 * stores (tabs, Durable Objects), which load without a bundler where `require` does
 * not exist; js-tests/store-checks.test.mjs holds the two together.
 */
const { describe } = require('../../common/describe.cjs');
const { checkWellFormed } = require('../../common/well-formed.cjs');

/** A key, owner or prefix: a non-empty string. */
function checkString(name, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
}

/**
 * A non-empty string of well-formed UTF-16, for stores whose client turns a lone
 * surrogate into U+FFFD (`pg`, etcd's gRPC): two keys would then share one lease.
 */
function checkText(name, value) {
  checkString(name, value);
  checkWellFormed(value, name);
}

/**
 * A lease's length. Whole milliseconds: the engine only ever asks for whole ms (its
 * durations are integers up to 2^31 − 1), and Redis's PX and etcd's rounding need them;
 * a fraction here is a caller's mistake, refused rather than rounded.
 */
function checkTtl(value) {
  if (typeof value !== 'number') {
    throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`ttlMs must be a positive integer number of milliseconds, got ${describe(value)}`);
  }
}

/** `subscribe`'s listener. */
function checkListener(onReleased) {
  if (typeof onReleased !== 'function') {
    throw new TypeError(`onReleased must be a function, got ${describe(onReleased)}`);
  }
}

/** `acquire`'s options: `{ queue: true }` asks to be queued when the key is held. */
function queueOption(options) {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object' || (options.queue !== undefined && typeof options.queue !== 'boolean')) {
    throw new TypeError(`options must be an object like { queue: true }, got ${describe(options)}`);
  }
  return options.queue === true;
}

/**
 * The token a store's renew or release carries (`{ fencingToken }`, local handoff), as
 * the decimal text a script or statement takes; undefined without options.
 */
function carriedToken(options) {
  if (options === undefined) return undefined;
  const token = options?.fencingToken;
  if (!Number.isSafeInteger(token) || token < 0) {
    throw new TypeError(`options must be an object like { fencingToken: <non-negative safe integer> }, got ${describe(options)}`);
  }
  return String(token);
}

/** `handOffAfter`, a store's turn (see `localHandoff`): whole milliseconds, 0 or more. */
function checkHandOff(value) {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`handOffAfter must be a non-negative integer number of milliseconds, got ${describe(value)}`);
  }
  return value;
}

/** A store's constructor options: an object (its names are checked by checkOptionNames). */
function checkOptionsObject(options, what) {
  if (options == null || typeof options !== 'object') {
    throw new TypeError(`options must be an object with ${what}, got ${describe(options)}`);
  }
}

module.exports = { checkString, checkText, checkTtl, checkListener, queueOption, carriedToken, checkHandOff, checkOptionsObject };
