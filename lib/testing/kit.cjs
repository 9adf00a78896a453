'use strict';
// `testLockStore`: registers the kit's cases for one store with the test functions of
// the runner in use. A case runs on a fresh store (the `store` option's), closes it
// after, and is skipped where the store does not declare what it needs. New groups of
// cases (inspection, say) join CASES with the capability they need.
const { caseContext, capabilitiesOf, hasAll } = require('./case-context.cjs');

const CASES = [
  ...require('./cases/leases.cjs').cases,
  ...require('./cases/expiry.cjs').cases,
  ...require('./cases/grants.cjs').cases,
  ...require('./cases/announcements.cjs').cases,
  ...require('./cases/engine.cjs').cases,
  ...require('./cases/permits.cjs').cases,
  ...require('./cases/permit-queue.cjs').cases,
  ...require('./cases/engine-permits.cjs').cases,
];

const OPTIONS = ['store', 'close', 'test', 'describe', 'clock', 'ttl', 'shortTtl', 'renewTtl', 'timeout', 'leasehold', 'capabilities'];
const CAPABILITIES = ['subscribe', 'grants', 'announces', 'localHandoff', 'permits'];

function kind(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? JSON.stringify(value) : typeof value === 'object' ? 'an object' : String(value);
}

function checkFunction(options, name, required) {
  const value = options[name];
  if (value === undefined && !required) return;
  if (typeof value !== 'function') throw new TypeError(`testLockStore: ${name} must be a function, got ${kind(value)}`);
}

function checkMs(options, name, fallback) {
  const value = options[name];
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new TypeError(`testLockStore: ${name} must be a positive integer number of milliseconds, got ${kind(value)}`);
  }
  return value;
}

/** The options, checked and with their defaults. `defaults`: the entry's `test`, `describe`, `leasehold`. */
function settingsOf(name, options, defaults) {
  if (typeof name !== 'string' || name === '') throw new TypeError(`testLockStore: name must be a non-empty string, got ${kind(name)}`);
  if (options === null || typeof options !== 'object') throw new TypeError(`testLockStore: options must be an object, got ${kind(options)}`);
  for (const key of Object.keys(options)) {
    if (!OPTIONS.includes(key)) throw new TypeError(`testLockStore has no option ${JSON.stringify(key)}; its options are ${OPTIONS.join(', ')}`);
  }
  checkFunction(options, 'store', true);
  for (const fn of ['close', 'test', 'describe']) checkFunction(options, fn, false);
  const { clock, capabilities = {} } = options;
  if (clock !== undefined && (clock === null || typeof clock.advance !== 'function' || typeof clock.now !== 'function')) {
    throw new TypeError(`testLockStore: clock must be the store's fake clock, with now() and advance(ms) (a FakeTimeProvider), got ${kind(clock)}`);
  }
  if (capabilities === null || typeof capabilities !== 'object') throw new TypeError(`testLockStore: capabilities must be an object, got ${kind(capabilities)}`);
  for (const [cap, value] of Object.entries(capabilities)) {
    if (!CAPABILITIES.includes(cap)) throw new TypeError(`testLockStore: no capability ${JSON.stringify(cap)}; the capabilities are ${CAPABILITIES.join(', ')}`);
    if (cap === 'permits' ? typeof value !== 'boolean' && value !== 'modes' : typeof value !== 'boolean') {
      const what = cap === 'permits' ? "a boolean or 'modes'" : 'a boolean';
      throw new TypeError(`testLockStore: capabilities.${cap} must be ${what}, got ${kind(value)}`);
    }
  }
  const { leasehold } = options;
  if (leasehold !== undefined && (leasehold === null || typeof leasehold.ResiliencePipelineBuilder !== 'function')) {
    throw new TypeError(`testLockStore: leasehold must be the leasehold module (with ResiliencePipelineBuilder), got ${kind(leasehold)}`);
  }
  const timeout = checkMs(options, 'timeout', 20_000);
  return {
    store: options.store,
    close: options.close,
    clock,
    capabilities,
    ttl: checkMs(options, 'ttl', 30_000),
    shortTtl: checkMs(options, 'shortTtl', clock ? 1000 : 500),
    renewTtl: checkMs(options, 'renewTtl', 1000),
    timeout,
    callTimeout: Math.min(timeout, 5000),
    leasehold: leasehold ? () => leasehold : defaults.leasehold,
    test: options.test,
    describe: options.describe,
  };
}

/** Runs `kase` on a fresh store; `t` is the runner's test context, when it passes one. */
async function runCase(kase, settings, t) {
  const store = await settings.store();
  if (store === null || typeof store !== 'object' || ['acquire', 'renew', 'release'].some((m) => typeof store[m] !== 'function')) {
    throw new TypeError(`testLockStore: the store option must make a store with acquire, renew and release, got ${kind(store)}`);
  }
  try {
    const caps = capabilitiesOf(store, settings.capabilities);
    if (kase.needs && !hasAll(caps, kase.needs)) {
      // node:test and Vitest mark the case skipped; under Jest it passes, having checked nothing.
      t?.skip?.(`the store does not declare ${[].concat(kase.needs).filter((need) => !caps[need]).join(' or ')}`);
      return;
    }
    await kase.run(caseContext(store, settings, kase.name));
  } finally {
    if (settings.close) await settings.close(store);
  }
}

/**
 * Registers the kit's cases for the store `options.store()` makes, under `name`.
 * `defaults`: what the entry supplies when the options do not (`test`, `describe`,
 * `leasehold`: functions that load them when first needed).
 */
function registerKit(name, options, defaults) {
  const settings = settingsOf(name, options, defaults);
  const test = settings.test ?? (settings.describe ? undefined : defaults.test());
  const describe = settings.describe ?? (settings.test ? undefined : defaults.describe());
  if (!test) throw new TypeError('testLockStore: describe was passed without test: pass both, or neither (node:test)');
  const register = () => {
    for (const kase of CASES) {
      // No declared parameter: Jest would take one for a `done` callback. The runner's
      // context (node:test, Vitest) is read from `arguments`.
      test(describe ? kase.name : `${name}: ${kase.name}`, function kitCase() {
        return runCase(kase, settings, arguments[0]);
      });
    }
  };
  if (describe) describe(name, register);
  else register();
}

module.exports = { registerKit, CASES };
