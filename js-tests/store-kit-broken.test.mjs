// The store kit against stores that break the contract, one way each: the kit's cases
// are registered with injected test functions and run here, and each broken store must
// fail the case for what it broke, with a message that says so, and pass the others.
// A correct store (and the granting store of support/stores.mjs, and the permit store of
// support/kit-permit-stores.mjs) passes every case.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import { FakeTimeProvider } from './support/leasehold.mjs';
import { testLockStore } from 'leasehold/testing';
import { kitStore } from './support/kit-stores.mjs';
import { grantingStore } from './support/stores.mjs';
import { permitStore } from './support/kit-permit-stores.mjs';

/** Runs every case the kit registers for `makeStore`: name -> 'passed' | 'skipped' | the error. */
async function runKit(makeStore, options = {}) {
  const clock = new FakeTimeProvider();
  const cases = [];
  testLockStore('under test', {
    store: () => makeStore(clock),
    clock,
    timeout: 2000,
    test: (name, fn) => cases.push({ name, fn }),
    describe: (name, fn) => fn(),
    ...options,
  });
  const results = new Map();
  for (const { name, fn } of cases) {
    let skipped = false;
    try {
      await fn.call(undefined, { skip: () => (skipped = true) });
      results.set(name, skipped ? 'skipped' : 'passed');
    } catch (error) {
      results.set(name, error);
    }
  }
  return results;
}

/** The failed cases of `results`, as { case name: message }. */
function failures(results) {
  const failed = {};
  for (const [name, outcome] of results) if (outcome instanceof Error) failed[name] = outcome.message;
  return failed;
}

const RENEW = 'renew succeeds only for the owner of the live lease';
const RELEASE = "release ends only its owner's lease";
const GRANT = 'acquire grants a free key with a fencing token, and refuses a held key to everyone, its holder included';
const TOKENS = 'fencing tokens only rise on a key, across owners and releases';
const EXPIRY = 'a lease not renewed ends after its ttl; its old owner can then neither renew nor release it';
const INPUT = 'refuses a bad key, owner or ttl with a TypeError or RangeError, granting nothing';
const CARRIED = 'the next grant is above the token a holder carried to renew and release';
const TURNS = 'through the engine: executions on one key take turns, each under a larger token';
const FAIL_FAST = 'through the engine: a fail-fast execution is refused while the key is held, and runs once it is free';
const WEIGHTS = 'permits: the weights held never sum past the limit, and a release makes room';
const HEAD = 'permits: a heavy try at the head of the queue is not overtaken by lighter ones; grants follow queue order';
const LIMITS = "permits: a key has one limit while held; a try with another is answered { limit: <the key's> }";
const PERMITS_ENGINE = 'through the engine: executions with { limit: 3 } run up to 3 permits at once, weights summed, never more';

test('a correct store passes every case it declares the capabilities for', async () => {
  const results = await runKit((clock) => kitStore(clock));
  assert.deepEqual(failures(results), {});
  assert.equal([...results.values()].filter((r) => r === 'passed').length, 11);
  const handoff = await runKit((clock) => kitStore(clock, { localHandoff: true }));
  assert.deepEqual(failures(handoff), {});
  assert.equal(handoff.get(CARRIED), 'passed');
});

test('a granting store passes the grant cases; one that offers grants inside release fails them, saying so', async () => {
  const good = await runKit((clock) => grantingStore(clock, { deliver: 'macrotask' }));
  // This test store checks no input: the only case it fails.
  assert.deepEqual(Object.keys(failures(good)), [INPUT]);
  assert.equal([...good.keys()].filter((n) => good.get(n) === 'passed' && /grant|queue/.test(n)).length, 6);
  const sync = failures(await runKit((clock) => grantingStore(clock, { deliver: 'sync' })));
  assert.match(sync["a queued try is handed the lease by the holder's release, told through subscribe's listener"], /offered inside the release call that made it: offer grants from a later turn/);
});

test('a store that keeps permits and grants on release passes every case; one declaring modes gets the mode cases alone', async () => {
  const results = await runKit((clock) => permitStore(clock));
  assert.deepEqual(failures(results), {});
  const permitCases = [...results.keys()].filter((name) => /^(permits|mode|through the engine: (executions with|readers))/.test(name));
  assert.equal(permitCases.length, 13);
  assert.deepEqual(permitCases.filter((name) => results.get(name) !== 'passed'), []);
  const modes = await runKit((clock) => permitStore(clock), { capabilities: { permits: 'modes' } });
  assert.deepEqual(failures(modes), {});
  const ran = permitCases.filter((name) => modes.get(name) === 'passed');
  assert.ok(ran.length === 4 && ran.every((name) => /^mode|readers/.test(name)), ran.join('\n'));
  // A store without the capability: every permit case skipped.
  const none = await runKit((clock) => permitStore(clock), { capabilities: { permits: false } });
  assert.deepEqual(permitCases.filter((name) => none.get(name) !== 'skipped'), []);
});

describe('a broken store fails the case for what it broke, saying what', { concurrency: true }, () => {
  const BROKEN = [
    ['renewAnyOwner', { [RENEW]: /renew by an owner that does not hold the lease answered true: renew must check the owner/ }],
    ['releaseAnyOwner', { [RELEASE]: /release by an owner that does not hold the lease answered true: release must check the owner/ }],
    ['reentrant', { [GRANT]: /acquire by the holder of a held key answered \{ fencingToken: \d+ \}: leases are not reentrant/ }],
    ['tokensGoBack', { [TOKENS]: /got token \d+, not above the previous grant's \d+: tokens must only rise per key/ }],
    ['neverExpires', { [EXPIRY]: /a lease of 1000 ms was never free for another owner: a lease must end after its ttl/ }],
    ['noInputChecks', { [INPUT]: /acquire\("", .*\) \(an empty key\) resolved to .*: a store must refuse an empty key with a TypeError or RangeError/ }],
    ['acquireShape', { [GRANT]: /resolved to \{"token":\d+\}: acquire must resolve to \{ fencingToken: <non-negative safe integer> \} or undefined/ }],
    ['renewShape', { [RENEW]: /renew\(.*\) resolved to "no": renew must resolve to a boolean/ }],
    ['ignoresCarriedToken', { [CARRIED]: /carried token \d+ got \d+: with localHandoff the next grant must exceed the token the holder carried/ }],
  ];
  for (const [fault, expected] of BROKEN) {
    test(fault, async () => {
      const broken = { [fault]: true, localHandoff: fault === 'ignoresCarriedToken' };
      const failed = failures(await runKit((clock) => kitStore(clock, broken)));
      for (const [name, message] of Object.entries(expected)) {
        assert.ok(name in failed, `${fault}: the case "${name}" passed; failed: ${JSON.stringify(failed, null, 2)}`);
        assert.match(failed[name], message);
      }
    });
  }

  const PERMITS = [
    ['ignoresWeights', { [WEIGHTS]: /a try for 2 permits answered \{ fencingToken: \d+ \} while 4 of the key's 5 were held: the weights of the holders are summed/, [PERMITS_ENGINE]: /executions with limit 3 held \d+ permits at once: the weights of the holders are summed/ }],
    ['overtakes', { [HEAD]: /a later queued try for 1 permit answered \{ fencingToken: \d+ \} while a try for 3 of 4 permits was queued ahead of it: nobody overtakes the head of the queue \(FIFO\)/ }],
    ['mixesLimits', { [LIMITS]: /a plain try on a key held with limit 3 answered undefined: limits agree on a key, the try must answer \{ limit: 3 \}/ }],
  ];
  for (const [fault, expected] of PERMITS) {
    test(`permits: ${fault}`, async () => {
      const failed = failures(await runKit((clock) => permitStore(clock, { [fault]: true })));
      for (const [name, message] of Object.entries(expected)) {
        assert.ok(name in failed, `${fault}: the case "${name}" passed; failed: ${JSON.stringify(failed, null, 2)}`);
        assert.match(failed[name], message);
      }
    });
  }

  test('a store that grants held keys fails the engine cases too: executions overlap', async () => {
    const failed = failures(await runKit((clock) => kitStore(clock, { grantsHeldKeys: true })));
    assert.match(failed[GRANT], /acquire by a second owner of a held key answered \{ fencingToken: \d+ \}: a held key must be refused/);
    assert.match(failed[TURNS], /two executions held the key at once .*: a store must refuse a held key/);
    assert.match(failed[FAIL_FAST], /a fail-fast execution on a held key ran: the store must refuse a held key/);
  });
});

test('bad options are refused at once, naming the option', () => {
  const noop = () => {};
  const refuses = (options, message) => assert.throws(() => testLockStore('x', { test: noop, describe: noop, ...options }), message);
  refuses({}, /testLockStore: store must be a function, got undefined/);
  refuses({ store: noop, clok: 1 }, /testLockStore has no option "clok"; its options are store, close/);
  refuses({ store: noop, clock: {} }, /clock must be the store's fake clock, with now\(\) and advance\(ms\)/);
  refuses({ store: noop, ttl: 0 }, /ttl must be a positive integer number of milliseconds, got 0/);
  refuses({ store: noop, capabilities: { inspect: true } }, /no capability "inspect"; the capabilities are subscribe, grants, announces, localHandoff, permits/);
  refuses({ store: noop, capabilities: { permits: 'weights' } }, /capabilities.permits must be a boolean or 'modes', got "weights"/);
  assert.throws(() => testLockStore('', { store: noop }), /name must be a non-empty string/);
  assert.throws(() => testLockStore('x', { store: noop, describe: noop }), /describe was passed without test/);
});

test('require and import give the same testLockStore', () => {
  const required = createRequire(import.meta.url)('leasehold/testing');
  assert.equal(required.testLockStore, testLockStore);
});
