// `withLock(key, fn, options)` keeps the pipeline of its last call for the next call with
// the same key and options (lib/host/with-lock.cjs): every option the next call gives
// must still take effect, whether it comes in a new object or a changed one.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { engine, withLock, MemoryLockStore, FakeTimeProvider, LockLimitMismatchError, getLockToken } from './support/leasehold.mjs';
import { deferred, flush } from './support/time.mjs';

function setup() {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  return { clock, store };
}

describe(`withLock with options, call after call (${engine})`, () => {
  test('the same options again run under a fresh lease and token each time', async () => {
    const { clock, store } = setup();
    const options = { store, timeProvider: clock, ttl: 1000 };
    const tokens = [];
    for (let i = 0; i < 4; i++) tokens.push(await withLock('k', (ctx) => getLockToken(ctx), { ...options }));
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1]);
    assert.equal(await store.isLocked('k'), false);
  });

  test('a changed option in the same object takes effect', async () => {
    const { clock, store } = setup();
    const options = { store, timeProvider: clock, ttl: 1000 };
    const ttls = [];
    const body = () => store.ttl('k').then((ms) => ttls.push(ms));
    await withLock('k', body, options);
    await withLock('k', body, options);
    options.ttl = 5000;
    await withLock('k', body, options);
    delete options.ttl;
    await withLock('k', body, options);
    assert.deepEqual(ttls, [1000, 1000, 5000, 30_000]);
  });

  test('another key, as the first argument or in the options, is another lock', async () => {
    const { clock, store } = setup();
    const options = { store, timeProvider: clock };
    const seen = [];
    await withLock('a', () => store.isLocked('a').then((held) => seen.push(['a', held])), options);
    await withLock('b', async () => seen.push(['b', await store.isLocked('b'), await store.isLocked('a')]), options);
    const keyed = { key: 'c', store, timeProvider: clock };
    await withLock(keyed, async () => seen.push(['c', await store.isLocked('c')]));
    keyed.key = 'd';
    await withLock(keyed, async () => seen.push(['d', await store.isLocked('d'), await store.isLocked('c')]));
    assert.deepEqual(seen, [
      ['a', true],
      ['b', true, false],
      ['c', true],
      ['d', true, false],
    ]);
  });

  test('a new limit is the one asked for, not the last call’s', async () => {
    const { clock, store } = setup();
    const hold = deferred();
    const held = withLock('doc', () => hold.promise, { store, timeProvider: clock, limit: 2 });
    await flush();
    // The same limit joins the holder; another one is refused, naming both.
    assert.equal(await withLock('doc', () => 'joined', { store, timeProvider: clock, limit: 2 }), 'joined');
    const error = await withLock('doc', () => 'never', { store, timeProvider: clock, limit: 3 }).catch((e) => e);
    assert.ok(error instanceof LockLimitMismatchError, `got ${error}`);
    assert.equal(error.limit, 3);
    assert.equal(error.heldWith, 2);
    hold.resolve();
    await held;
  });

  test('skipOnLockFailure and bad options are honoured on every call', async () => {
    const { clock, store } = setup();
    const hold = deferred();
    const held = withLock('k', () => hold.promise, { store, timeProvider: clock });
    await flush();
    const options = { store, timeProvider: clock, skipOnLockFailure: true };
    assert.equal(await withLock('k', () => 'ran', options), undefined);
    options.skipOnLockFailure = false;
    options.wait = 0;
    await assert.rejects(withLock('k', () => 'ran', options), /not acquired|held/i);
    options.wiat = 10;
    await assert.rejects(withLock('k', () => 'ran', options), /wiat/);
    hold.resolve();
    await held;
  });
});
