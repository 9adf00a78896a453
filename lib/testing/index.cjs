'use strict';
// `leasehold/testing`: the store kit, for anyone who writes a LockStore. The cases live
// in lib/testing/cases/; this entry supplies node:test and the package's own API when a
// test does not pass them. Both are loaded when first needed, so a test under Vitest or
// Jest never loads node:test.
const { registerKit } = require('./kit.cjs');

const defaults = {
  test: () => require('node:test').test,
  describe: () => require('node:test').describe,
  // By the package's own name, so that the runtime's conditions pick the entry a user's
  // `require('leasehold')` gets: the same engine, the same MemoryLockStore class.
  leasehold: () => require('leasehold'),
};

/**
 * Registers the conformance cases of the LockStore contract for the store `options.store()`
 * makes (a fresh one per case), under `name`: with `options.test`/`options.describe` when
 * given (Vitest, Jest), with node:test otherwise. See testing.d.ts for every option.
 */
function testLockStore(name, options) {
  registerKit(name, options, defaults);
}

module.exports = { testLockStore };
