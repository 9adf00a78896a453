// Every invalid option: the error class, the moment it is thrown, and a message that
// names the argument. Runs once per engine.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  getLockToken,
  acquireLock,
  withLock,
} from './support/leasehold.mjs';

const clock = new FakeTimeProvider();
const builder = () => new ResiliencePipelineBuilder({ timeProvider: clock });
// Tokens only increase per key: a store that answers one twice is refused.
let okToken = 0;
const okStore = { acquire: async () => ({ fencingToken: ++okToken }), renew: async () => true, release: async () => {} };
const huge = 'x'.repeat(10 * 1024 * 1024);

function assertNames(fn, ErrorClass, arg) {
  let error;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  assert.ok(error, `expected ${ErrorClass.name} for ${arg}`);
  assert.ok(error instanceof ErrorClass, `${arg}: got ${error?.constructor?.name}: ${error?.message}`);
  assert.match(error.message, new RegExp(`\\b${arg}\\b`), `message names ${arg}: ${error.message}`);
  assert.ok(error.message.length < 300, `message stays short: ${error.message.length}`);
}

describe('addLock throws at once for bad options', () => {
  const cases = [
    // [option, value, error class]
    ['ttl', 0, RangeError],
    ['ttl', -1, RangeError],
    ['ttl', NaN, RangeError],
    ['ttl', Infinity, RangeError],
    ['ttl', -Infinity, RangeError],
    ['ttl', 1e300, RangeError],
    ['ttl', '0ms', RangeError],
    ['ttl', 'abc', TypeError],
    ['ttl', '30', TypeError],
    ['ttl', '', TypeError],
    ['ttl', huge, TypeError],
    ['ttl', {}, TypeError],
    ['ttl', null, TypeError],
    ['ttl', true, TypeError],
    ['ttl', 10n, TypeError],
    ['ttl', Symbol('s'), TypeError],
    ['wait', -1, RangeError],
    ['wait', NaN, RangeError],
    ['wait', -Infinity, RangeError],
    ['wait', 1e300, RangeError],
    ['wait', 'soon', TypeError],
    ['wait', null, TypeError],
    ['wait', [], TypeError],
    ['key', '', TypeError],
    ['key', 5, TypeError],
    ['key', null, TypeError],
    ['key', {}, TypeError],
    ['key', Symbol('k'), TypeError],
    ['store', {}, TypeError],
    ['store', 5, TypeError],
    ['store', null, TypeError],
    ['store', { acquire() {}, renew() {} }, TypeError],
    ['onLockLost', 5, TypeError],
    ['onLockLost', 'x', TypeError],
    ['name', 5, TypeError],
  ];
  for (const [option, value, ErrorClass] of cases) {
    const label = typeof value === 'symbol' ? 'a symbol' : typeof value === 'bigint' ? `${value}n` : JSON.stringify(value)?.slice(0, 20);
    test(`${option}: ${label} → ${ErrorClass.name}`, () => {
      assertNames(() => builder().addLock({ key: 'k', [option]: value }), ErrorClass, option);
    });
  }

  test('options that are not an object', () => {
    for (const value of [undefined, null, 5, 'k']) {
      assertNames(() => builder().addLock(value), TypeError, 'options');
    }
  });

  test('valid durations are accepted', () => {
    for (const ttl of [1, 0.5, '250ms', '30s', '5m', '1h', '1m30s', 2 ** 31 - 1]) builder().addLock({ key: 'k', ttl });
    for (const wait of [0, '0ms', 100, '2s', Infinity]) builder().addLock({ key: 'k', wait });
  });

  test('a ttl string reaches the store as its milliseconds', async () => {
    const seen = [];
    const store = { ...okStore, acquire: async (key, owner, ttlMs) => (seen.push(ttlMs), { fencingToken: ++okToken }) };
    const cases = [
      ['250ms', 250],
      ['30s', 30_000],
      ['5m', 300_000],
      ['1h', 3_600_000],
      ['1m30s', 90_000],
      [1, 1],
      [2 ** 31 - 1, 2 ** 31 - 1],
    ];
    for (const [ttl] of cases) await builder().addLock({ key: 'k', ttl, store }).build().execute(() => 1);
    assert.deepEqual(seen, cases.map(([, ms]) => ms));
  });
});

describe('a name that is no option is refused, not ignored', () => {
  test('execute and settle: their options too, and an array is no options object', async () => {
    const pipeline = builder().addLock({ key: 'k' }).build();
    let ran = 0;
    const signall = new AbortController().signal;
    for (const run of [(o) => pipeline.execute(() => ++ran, o), (o) => pipeline.settle(() => ++ran, o).then((r) => (r.ok ? r.value : Promise.reject(r.error)))]) {
      await assert.rejects(run({ signall }), (e) => e instanceof TypeError && /"signall"/.test(e.message) && /\bsignal\b/.test(e.message));
      await assert.rejects(run([]), (e) => e instanceof TypeError && /execute options/.test(e.message));
    }
    assert.equal(ran, 0);
  });

  // A misspelled option would otherwise be dropped in silence: `timeout` for `wait`
  // would fail fast where the caller meant to wait.
  test('builder, addLock, MemoryLockStore, acquireLock and withLock name it', async () => {
    assertNames(() => new ResiliencePipelineBuilder({ timeProvider: clock, telemetri: () => {} }), TypeError, 'telemetri');
    assertNames(() => builder().addLock({ key: 'k', timeout: '5s' }), TypeError, 'timeout');
    assertNames(() => builder().addLock({ key: 'k', ttl: 1000, waitMs: 10 }), TypeError, 'waitMs');
    assertNames(() => new MemoryLockStore({ timeProvider: clock, clock }), TypeError, 'clock');
    const store = new MemoryLockStore({ timeProvider: clock });
    await assert.rejects(acquireLock(store, 'k', 1000, { wiat: 10 }), (e) => e instanceof TypeError && /"wiat"/.test(e.message) && /\bwait\b/.test(e.message));
    let ran = false;
    await assert.rejects(
      withLock({ key: 'k', store, timeProvider: clock, autoRenew: true }, () => (ran = true)),
      (e) => e instanceof TypeError && /"autoRenew"/.test(e.message),
    );
    assert.equal(ran, false);
    // The options they do have still work, all at once.
    const lease = await acquireLock(store, 'k', 1000, { wait: 0, signal: new AbortController().signal, autoRenew: false, timeProvider: clock });
    assert.ok(lease);
    assert.equal(await lease.release(), true);
    const all = { key: 'k', ttl: 1000, wait: 0, store, onLockLost: () => {}, name: 'n' };
    assert.equal(await builder().addLock(all).build().execute(() => 7), 7);
    assert.equal(await withLock({ ...all, timeProvider: clock, telemetry: () => {}, signal: undefined, operationKey: 'o' }, () => 8), 8);
  });
});

test('a MemoryLockStore on another time provider than the builder is refused by addLock, as by acquireLock', () => {
  const other = new FakeTimeProvider();
  assertNames(() => builder().addLock({ key: 'k', store: new MemoryLockStore({ timeProvider: other }) }), TypeError, 'store');
  assertNames(() => builder().addLock({ key: 'k', store: new MemoryLockStore() }), TypeError, 'store');
  assertNames(() => new ResiliencePipelineBuilder().addLock({ key: 'k', store: new MemoryLockStore({ timeProvider: other }) }), TypeError, 'store');
  assert.ok(builder().addLock({ key: 'k', store: new MemoryLockStore({ timeProvider: clock }) }).build());
});

test('a duration string with a lone surrogate is a TypeError that shows it, not U+FFFD', () => {
  assertNames(() => builder().addLock({ key: 'k', ttl: '5\ud800s' }), TypeError, 'ttl');
  assert.throws(() => builder().addLock({ key: 'k', wait: '1\udc00m' }), (e) => e instanceof TypeError && /\\udc00/.test(e.message) && !e.message.includes('\ufffd'));
});

describe('withLock says what is wrong with its arguments', () => {
  test('a bad first argument, no key, a key twice, options twice', async () => {
    const store = new MemoryLockStore({ timeProvider: clock });
    const fails = async (promise, pattern) => assert.rejects(promise, (e) => e instanceof TypeError && pattern.test(e.message));
    await fails(withLock(42, () => 1), /withLock takes a key .* got 42/);
    await fails(withLock(42, () => 1, { ttl: 1000 }), /withLock takes a key .* got 42/);
    await fails(withLock(null, () => 1), /withLock takes a key .* got null/);
    await fails(withLock({ store }, () => 1), /withLock needs a key/);
    await fails(withLock('k', () => 1, { key: 'other', store }), /key twice/);
    await fails(withLock({ key: 'k', store }, () => 1, { wait: 5 }), /no third argument/);
  });

  test("withLock on a MemoryLockStore without a timeProvider runs on the store's clock", async () => {
    const own = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: own });
    const seen = await withLock('k', async () => [store.size, await store.ttl('k')], { store, ttl: '1s' });
    assert.deepEqual(seen, [1, 1000], "the lease, on the store's clock");
    await assert.rejects(withLock('k', () => 1, { store, timeProvider: new FakeTimeProvider() }), (e) => e instanceof TypeError && /store/.test(e.message));
  });

  test('withLock(options, fn) honours the signal and operationKey in its options', async () => {
    const store = new MemoryLockStore({ timeProvider: clock });
    const controller = new AbortController();
    controller.abort(new Error('stopped'));
    let ran = false;
    await assert.rejects(withLock({ key: 'k', store, timeProvider: clock, signal: controller.signal }, () => (ran = true)), /stopped/);
    assert.equal(ran, false);
    assert.equal(await withLock({ operationKey: 'op', store, timeProvider: clock }, ({ operationKey }) => operationKey), 'op');
  });
});

describe('the builder', () => {
  test('bad builder options', () => {
    assertNames(() => new ResiliencePipelineBuilder({ timeProvider: { now: () => 0 } }), TypeError, 'timeProvider');
    assertNames(() => new ResiliencePipelineBuilder({ telemetry: 5 }), TypeError, 'telemetry');
    assertNames(() => new ResiliencePipelineBuilder(null), TypeError, 'options');
  });

  test('build without a lock', () => {
    assert.throws(() => builder().build(), /addLock/);
  });
});

describe('execute rejects, never throws', () => {
  const pipeline = builder().addLock({ key: 'k', store: okStore }).build();
  const cases = [
    ['callback', () => pipeline.execute(undefined)],
    ['callback', () => pipeline.execute('x')],
    ['options', () => pipeline.execute(() => 1, 5)],
    ['operationKey', () => pipeline.execute(() => 1, { operationKey: 7 })],
    ['signal', () => pipeline.execute(() => 1, { signal: {} })],
  ];
  for (const [arg, call] of cases) {
    test(`${arg}`, async () => {
      const result = call();
      assert.ok(result instanceof Promise);
      const error = await result.catch((e) => e);
      assert.ok(error instanceof TypeError, String(error));
      assert.match(error.message, new RegExp(`\\b${arg}\\b`));
    });
  }

  test('no key and no operationKey is a TypeError that says so', async () => {
    const keyless = builder().addLock({ store: okStore }).build();
    const error = await keyless.execute(() => 1).catch((e) => e);
    assert.ok(error instanceof TypeError);
    assert.match(error.message, /key/);
    assert.match(error.message, /operationKey/);
  });

  test('a key function returning a non-string or an empty string', async () => {
    for (const value of ['', 5, undefined, null]) {
      const p = builder().addLock({ key: () => value, store: okStore }).build();
      const error = await p.execute(() => 1).catch((e) => e);
      assert.ok(error instanceof TypeError, String(value));
      assert.match(error.message, /key/);
    }
  });

  test('a key function that throws rejects with its error', async () => {
    const p = builder().addLock({ key: () => { throw new Error('no key'); }, store: okStore }).build();
    await assert.rejects(p.execute(() => 1), /no key/);
  });
});

describe('keys', () => {
  test('any Unicode and special characters lock independently', async () => {
    const store = new MemoryLockStore({ timeProvider: clock });
    const keys = ['a', 'A', 'a ', '{a}', 'a}', '{', '}', '*', 'a*', 'x\ny', '\u0000', 'ключ', '鍵', '🔒', 'e\u0301', '\u00e9'];
    const tokens = new Map();
    for (const key of keys) {
      const lease = await store.acquire(key, 'owner', 10_000);
      assert.ok(lease, `${JSON.stringify(key)} is free`);
      tokens.set(key, lease.fencingToken);
    }
    assert.equal(store.size, keys.length);
    for (const key of keys) assert.equal(await store.acquire(key, 'other', 10_000), undefined);
  });

  // A key cut in the middle of a surrogate pair (`name.slice(0, 64)` on an emoji) is
  // still a non-empty string, but both engines would turn the lone surrogate into U+FFFD:
  // distinct keys would collide, and a JS store would see a changed key. So it is refused
  // wherever a key comes in.
  test('keys with a lone surrogate are a TypeError that names the argument and says why', async () => {
    const cut = 'cut:\uD83D';
    const message = /\bkey must be well-formed UTF-16 \(a lone surrogate at index 4\), got "cut:\\ud83d"$/;
    assertNames(() => builder().addLock({ key: cut }), TypeError, 'key');
    assert.throws(() => builder().addLock({ key: cut }), message);
    assertNames(() => builder().addLock({ key: '\uDE00x' }), TypeError, 'key');
    // A long key is shown cut, but never between the halves of a pair: only the real
    // lone surrogate may show as one.
    const long = `${'x'.repeat(39)}\uD83D\uDD12${'y'.repeat(9)}\uD800`;
    assert.throws(() => builder().addLock({ key: long }), {
      message: `key must be well-formed UTF-16 (a lone surrogate at index 50), got "${'x'.repeat(39)}…" (51 characters)`,
    });

    let ran = 0;
    const viaFunction = builder().addLock({ key: () => cut, store: okStore }).build();
    await assert.rejects(viaFunction.execute(() => ++ran), (e) => e instanceof TypeError && message.test(e.message));
    const viaOperationKey = builder().addLock({ store: okStore }).build();
    const error = await viaOperationKey.execute(() => ++ran, { operationKey: cut }).catch((e) => e);
    assert.ok(error instanceof TypeError, String(error));
    assert.match(error.message, /^operationKey must be well-formed UTF-16/);
    await assert.rejects(withLock(cut, () => ++ran, { store: okStore, timeProvider: clock }), message);
    assert.equal(ran, 0);

    await assert.rejects(acquireLock(okStore, cut, '1s', { timeProvider: clock }), message);
    const store = new MemoryLockStore({ timeProvider: clock });
    for (const call of [
      () => store.acquire(cut, 'o', 1000),
      () => store.renew(cut, 'o', 1000),
      () => store.release(cut, 'o'),
      () => store.isLocked(cut),
      () => store.ttl(cut),
    ]) {
      await assert.rejects(call(), message);
    }
    await assert.rejects(store.acquire('k', 'owner:\uD83D', 1000), /^TypeError: owner must be well-formed UTF-16/);
    // A whole pair is a character like any other.
    assert.ok(await store.acquire('cut:\uD83D\uDE00', 'o', 1000));
  });
});

describe('other entry points', () => {
  test('FakeTimeProvider', () => {
    assertNames(() => new FakeTimeProvider(-1), RangeError, 'start');
    assertNames(() => new FakeTimeProvider('0'), TypeError, 'start'); // as advance('1s') is
    const c = new FakeTimeProvider(5);
    assert.equal(c.now(), 5);
    assertNames(() => c.advance(-1), RangeError, 'ms');
    assertNames(() => c.advance(NaN), RangeError, 'ms');
    assertNames(() => c.advance('1s'), TypeError, 'ms');
    c.advance(10);
    assert.equal(c.now(), 15);
    // Beyond Number.MAX_SAFE_INTEGER, times no longer pass exactly between JS and the
    // engine (a start of 1e300 used to give leases that excluded nobody).
    assertNames(() => new FakeTimeProvider(1e300), RangeError, 'start');
    assertNames(() => new FakeTimeProvider(Number.MAX_SAFE_INTEGER + 2), RangeError, 'start');
    const late = new FakeTimeProvider(Number.MAX_SAFE_INTEGER - 10);
    assertNames(() => late.advance(10.5), RangeError, 'ms');
    assertNames(() => late.advance(11), RangeError, 'ms');
    assert.equal(late.now(), Number.MAX_SAFE_INTEGER - 10, 'a refused advance moves nothing');
    late.advance(10);
    assert.equal(late.now(), Number.MAX_SAFE_INTEGER);
  });

  test('MemoryLockStore methods reject bad arguments', async () => {
    const store = new MemoryLockStore({ timeProvider: clock });
    await assert.rejects(store.acquire('', 'o', 10), (e) => e instanceof TypeError && /key/.test(e.message));
    await assert.rejects(store.acquire('k', '', 10), (e) => e instanceof TypeError && /owner/.test(e.message));
    await assert.rejects(store.acquire('k', 'o', 0), (e) => e instanceof RangeError && /ttlMs/.test(e.message));
    await assert.rejects(store.acquire('k', 'o', '10'), (e) => e instanceof TypeError && /ttlMs/.test(e.message));
    await assert.rejects(store.renew('k', 'o', NaN), RangeError);
    await assert.rejects(store.release(5, 'o'), TypeError);
    await assert.rejects(store.ttl(null), TypeError);
    assertNames(() => new MemoryLockStore({ timeProvider: 5 }), TypeError, 'timeProvider');
    assertNames(() => new MemoryLockStore(7), TypeError, 'options');
  });

  test('getLockToken with something that is not a context', () => {
    assertNames(() => getLockToken(5), TypeError, 'context');
    assertNames(() => getLockToken({}), TypeError, 'context');
  });
});

// index.d.ts: "Moving past `Number.MAX_SAFE_INTEGER` is a `RangeError`" -- nothing else.
// The binding validates the step as a lease duration (duration::from_millis, capped at
// 2^31 - 1 ms), so a test that moves its fake clock by a month is refused.
test('FakeTimeProvider.advance takes a step longer than 2^31 - 1 ms (about 24.8 days)', async () => {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  assert.ok(await store.acquire('k', 'first', 1000));
  const month = 30 * 24 * 60 * 60 * 1000;
  clock.advance(month);
  assert.equal(clock.now(), month);
  assert.ok(await store.acquire('k', 'second', 1000), 'the first lease expired during the step');
  clock.advance(2 ** 31);
  assert.equal(clock.now(), month + 2 ** 31);
});
