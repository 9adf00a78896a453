// The stores' argument checks are written twice: lib/stores/shared/checks.cjs and
// permits.cjs for the CommonJS stores, lib/stores/shared/store-support.mjs for the ES
// ones (tabs, Durable Objects), which load where `require` does not exist. This holds the
// two to one rule:
// the same inputs are refused with the same error class and message, and accepted alike.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as esm from '../lib/stores/shared/store-support.mjs';

const require = createRequire(import.meta.url);
const cjs = require('../lib/stores/shared/checks.cjs');

/** What `check(...args)` does: undefined when it accepts, else `[class name, message]`. */
function outcome(check, ...args) {
  try {
    check(...args);
    return undefined;
  } catch (error) {
    return [error.constructor.name, error.message];
  }
}

const TTLS = [1, 2147483647, Number.MAX_SAFE_INTEGER, 0, -1, 1.5, 0.25, NaN, Infinity, -Infinity, '10', 10n, null, undefined, {}, []];
const STRINGS = ['k', 'a key', 'ü🔒', '', 0, 7n, null, undefined, {}, [], Symbol('s'), () => {}];
const LONG = ['x'.repeat(41), `${'y'.repeat(39)}\u{1F512}tail`];
const LISTENERS = [() => {}, function named() {}, null, undefined, 'f', {}];

test('checkTtl: whole positive milliseconds, in both module formats', () => {
  for (const ttl of TTLS) assert.deepEqual(outcome(esm.checkTtl, ttl), outcome(cjs.checkTtl, ttl), `ttl ${String(ttl)}`);
  assert.equal(outcome(cjs.checkTtl, 1000), undefined);
  assert.deepEqual(outcome(cjs.checkTtl, 1.5), ['RangeError', 'ttlMs must be a positive integer number of milliseconds, got 1.5']);
  assert.deepEqual(outcome(cjs.checkTtl, '10'), ['TypeError', 'ttlMs must be a number of milliseconds, got "10"']);
});

test('checkString: non-empty strings, in both module formats', () => {
  for (const value of STRINGS) {
    assert.deepEqual(outcome(esm.checkString, 'key', value), outcome(cjs.checkString, 'key', value), `key ${String(typeof value)}`);
  }
  assert.deepEqual(outcome(cjs.checkString, 'owner', ''), ['TypeError', 'owner must be a non-empty string, got ""']);
  // Long values are cut alike (never between the halves of a surrogate pair).
  for (const value of LONG) assert.deepEqual(outcome(esm.checkTtl, value), outcome(cjs.checkTtl, value));
});

test('describe: one form in both module formats, a revoked proxy included', () => {
  const { describe } = require('../lib/common/describe.cjs');
  const revoked = Proxy.revocable([], {});
  revoked.revoke();
  for (const value of [...STRINGS, ...LONG, ...TTLS, revoked.proxy]) {
    assert.equal(esm.describe(value), describe(value), `${typeof value} ${describe(value)}`);
  }
  assert.equal(esm.describe(revoked.proxy), 'an object');
});

test('checkListener: a function, in both module formats', () => {
  for (const value of LISTENERS) assert.deepEqual(outcome(esm.checkListener, value), outcome(cjs.checkListener, value));
  assert.deepEqual(outcome(cjs.checkListener, 'f'), ['TypeError', 'onReleased must be a function, got "f"']);
});

test('checkText refuses a lone surrogate, naming where it is', () => {
  assert.equal(outcome(cjs.checkText, 'key', 'a\uD83D\uDD12'), undefined);
  const [name, message] = outcome(cjs.checkText, 'key', 'ab\uD800');
  assert.equal(name, 'TypeError');
  assert.match(message, /^key must be well-formed UTF-16 \(a lone surrogate at index 2\)/);
});

test('carriedToken and queueOption read the engine\'s options, and refuse others', () => {
  assert.equal(cjs.carriedToken(undefined), undefined);
  assert.equal(cjs.carriedToken({ fencingToken: 0 }), '0');
  assert.equal(cjs.carriedToken({ fencingToken: 2 ** 53 - 1 }), '9007199254740991');
  for (const bad of [null, {}, { fencingToken: -1 }, { fencingToken: 1.5 }, { fencingToken: '3' }]) {
    assert.throws(() => cjs.carriedToken(bad), /options must be an object like \{ fencingToken: <non-negative safe integer> \}/);
  }
  assert.equal(cjs.queueOption(undefined), false);
  assert.equal(cjs.queueOption({ queue: true }), true);
  assert.equal(cjs.queueOption({}), false);
  for (const bad of [null, 'queue', { queue: 1 }]) assert.throws(() => cjs.queueOption(bad), /options must be an object like \{ queue: true \}/);
});

const permits = require('../lib/stores/shared/permits.cjs');
const LIMITS = [1, 2, 3, 2147483647, 2147483648, 0, -1, 2.5, NaN, Infinity, '3', 3n, null, undefined, {}];

test('acquireOptions: { queue, limit, weight } checked alike in both module formats', () => {
  assert.equal(esm.SHARED_LIMIT, permits.SHARED_LIMIT);
  const options = [undefined, null, 'queue', 7, [], {}, { queue: true }, { queue: false }, { queue: 1 }, { queue: 'yes' }];
  for (const limit of LIMITS) {
    for (const weight of LIMITS) options.push({ queue: true, limit, weight });
    options.push({ limit }, { weight: limit });
  }
  for (const value of options) {
    assert.deepEqual(outcome(esm.acquireOptions, value), outcome(permits.acquireOptions, value), esm.describe(value));
    if (outcome(permits.acquireOptions, value) === undefined) assert.deepEqual(esm.acquireOptions(value), permits.acquireOptions(value));
  }
  // What each answers, and what it refuses, naming the field.
  assert.deepEqual(permits.acquireOptions(undefined), { queue: false, limit: undefined, weight: undefined });
  assert.deepEqual(permits.acquireOptions({ queue: true, limit: 5, weight: 2 }), { queue: true, limit: 5, weight: 2 });
  assert.deepEqual(outcome(permits.acquireOptions, { limit: 3, weight: 4 }), ['RangeError', 'options.weight must be an integer from 1 to the limit (3), got 4']);
  assert.deepEqual(outcome(permits.acquireOptions, { limit: 0, weight: 1 }), ['RangeError', 'options.limit must be an integer from 1 to 2147483647, got 0']);
  assert.deepEqual(outcome(permits.acquireOptions, { queue: 1 }), ['TypeError', 'options must be an object like { queue: true }, got an object']);
});

test('permitsShown: a weight, and a mode on a key used with modes, in both module formats', () => {
  const shared = permits.SHARED_LIMIT;
  for (const [limit, weight] of [[1, 1], [5, 2], [shared - 1, 1], [shared, 1], [shared, shared]]) {
    assert.deepEqual(esm.permitsShown(limit, weight), permits.permitsShown(limit, weight), `${limit}, ${weight}`);
  }
  assert.deepEqual(permits.permitsShown(5, 2), { weight: 2 });
  assert.deepEqual(permits.permitsShown(shared, 1), { weight: 1, mode: 'shared' });
  assert.deepEqual(permits.permitsShown(shared, shared), { weight: shared, mode: 'exclusive' });
});
