// MemoryLockStore's `inspect` and `list`, answered by the engine (core/src/engine/
// inspect.rs): a held key with two waiters read exactly on a fake clock (owners, tokens,
// time left, waiters in order and since when), a missing key, a lease just lapsed, a
// fast-path hold, `list` in order by prefix and limit over more than a page, and that
// inspecting changes nothing. Both engines: LEASEHOLD_ENGINE=native|wasm.
// Run: node --test js-tests/memory-inspect.test.mjs

import assert from 'node:assert/strict';
import os from 'node:os';
import { test } from 'node:test';
import { FakeTimeProvider, MemoryLockStore, acquireLock, withLock, ResiliencePipelineBuilder } from './support/leasehold.mjs';
import { checkHeldWithTwoWaiters, holdWithWaiters } from './support/inspect-scenario.mjs';
import { flush } from './support/time.mjs';

async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

test('a held key with two waiters, on a fake clock: exactly what the engine keeps', async () => {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const lease = await acquireLock(store, 'job', 3_000, { timeProvider: clock });
  const first = withLock({ key: 'job', store, ttl: 3_000, wait: 10_000, timeProvider: clock }, () => store.inspect('job'));
  await flush();
  clock.advance(100);
  const second = withLock({ key: 'job', store, ttl: 3_000, wait: 10_000, timeProvider: clock }, () => store.inspect('job'));
  await flush();
  clock.advance(50);
  const t = clock.now();
  const seen = await store.inspect('job');
  assert.deepEqual(seen.holders, [{ owner: lease.owner, fencingToken: lease.fencingToken, ttl: 3_000 - 150 }]);
  assert.deepEqual(
    seen.waiters.map((w) => w.since),
    [t - 150, t - 50],
    'since when each waits, on the store clock',
  );
  assert.equal(new Set([lease.owner, ...seen.waiters.map((w) => w.owner)]).size, 3);
  assert.deepEqual(await store.inspect('job'), seen, 'inspecting twice: the same (nothing moved)');
  assert.equal(await store.ttl('job'), 3_000 - 150, 'the lease was not extended');
  await lease.release();
  const whileFirst = await first;
  assert.equal(whileFirst.holders[0].owner, seen.waiters[0].owner, 'the first waiter shown ran first');
  assert.ok(whileFirst.holders[0].fencingToken > lease.fencingToken);
  assert.deepEqual(whileFirst.waiters.map((w) => w.owner), [seen.waiters[1].owner]);
  const whileSecond = await second;
  assert.equal(whileSecond.holders[0].owner, seen.waiters[1].owner);
  assert.deepEqual(whileSecond.waiters, []);
  assert.equal(await store.inspect('job'), undefined);
});

test('the shared scenario on the system clock', async () => {
  const store = new MemoryLockStore();
  const scenario = await holdWithWaiters({ holderStore: store, waiterStores: [store, store], key: 'shared', inspect: () => store.inspect('shared') });
  const now = Date.now();
  await checkHeldWithTwoWaiters(scenario, await store.inspect('shared'), {
    since: (since) => assert.ok(since <= now && since > now - 10_000),
  });
});

test('owners say which host and process drew them, and the name given to the lock', async () => {
  const store = new MemoryLockStore();
  const host = os.hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 63);
  const lease = await acquireLock(store, 'who', 1_000);
  assert.match(lease.owner, /^[^:]+:\d+:[0-9a-f]{32}$/);
  assert.equal(lease.owner, `${host}:${process.pid}:${lease.owner.slice(-32)}`);
  await lease.release();
  const named = await acquireLock(store, 'who', 1_000, { name: 'nightly report' });
  assert.equal(named.owner, `${host}:${process.pid}:nightly-report:${named.owner.slice(-32)}`, 'the name, made one word');
  await named.release();
  const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'who', store, name: 'billing/sync' }).build();
  const inside = await pipeline.execute(() => store.inspect('who'));
  assert.match(inside.holders[0].owner, new RegExp(`^${host}:${process.pid}:billing/sync:[0-9a-f]{32}$`));
  const waited = await withLock({ key: 'who', store, name: 'x'.repeat(100) }, () => store.inspect('who'));
  assert.equal(waited.holders[0].owner.split(':')[2], 'x'.repeat(64), 'at most 64 characters');
  await assert.rejects(acquireLock(store, 'who', 1_000, { name: 3 }), /name must be a string, got 3/);
});

test('a missing key, a lapsed lease, a hold granted on the fast path', async () => {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  assert.equal(await store.inspect('nothing'), undefined);
  const got = await store.acquire('brief', 'me', 100);
  assert.equal((await store.inspect('brief')).holders[0].ttl, 100);
  clock.advance(100);
  assert.equal(await store.inspect('brief'), undefined, 'lapsed at its expiry');
  assert.deepEqual(await collect(store.list()), []);
  // A pipeline of one memory lock takes a free key without the engine (the fast path).
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'fast', store, ttl: 1_000 }).build();
  const inside = await pipeline.execute(async () => [await store.inspect('fast'), await collect(store.list())]);
  assert.equal(inside[0].holders.length, 1);
  assert.equal(inside[0].holders[0].ttl, 1_000);
  assert.deepEqual(inside[1], ['fast']);
  assert.ok(got.fencingToken < inside[0].holders[0].fencingToken);
});

test('list: held keys in order, by prefix and limit, page after page', async () => {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const keys = Array.from({ length: 700 }, (_, i) => `k/${String(i).padStart(4, '0')}`);
  for (const key of keys) await store.acquire(key, 'o', 1_000);
  await store.acquire('other', 'o', 1_000);
  await store.acquire('k/released', 'o', 1_000);
  await store.release('k/released', 'o');
  assert.deepEqual(await collect(store.list({ prefix: 'k/' })), keys);
  assert.deepEqual(await collect(store.list({ prefix: 'k/', limit: 300 })), keys.slice(0, 300));
  assert.deepEqual(await collect(store.list({ limit: 0 })), []);
  assert.equal((await collect(store.list())).length, 701);
  assert.throws(() => store.list({ prefix: 3 }), TypeError);
  assert.throws(() => store.list({ limit: 1.5 }), RangeError);
  assert.throws(() => store.list({ limt: 1 }), TypeError);
  await assert.rejects(store.inspect(''), TypeError);
});
