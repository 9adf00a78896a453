// Permits on the memory store (issue #28): limit, weight and mode through addLock,
// withLock and acquireLock, on fake time. The stores' own permit tests are beside their
// suites (redis-permits, postgres-permits, ...); the store kit holds them to one contract.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockLimitMismatchError,
  LockLostError,
  acquireLock,
  withLock,
  getLockToken,
} from './support/leasehold.mjs';
import { advance, deferred, flush } from './support/time.mjs';

const SHARED_LIMIT = 2147483647;

function setup() {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const lock = (options) =>
    new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k', store, wait: Infinity, ...options }).build();
  return { clock, store, lock };
}

/** Runs callbacks that each hold until released by hand; records who is inside. */
function gate() {
  const inside = new Map();
  const order = [];
  let most = 0;
  let weightInside = 0;
  let mostWeight = 0;
  const enter = (name, weight = 1) => {
    const release = deferred();
    inside.set(name, release);
    order.push(name);
    weightInside += weight;
    most = Math.max(most, inside.size);
    mostWeight = Math.max(mostWeight, weightInside);
    return release.promise.then(() => {
      inside.delete(name);
      weightInside -= weight;
      return getLockToken();
    });
  };
  const leave = async (name) => {
    inside.get(name).resolve();
    await flush();
  };
  return { inside, order, enter, leave, most: () => most, mostWeight: () => mostWeight };
}

describe('limit and weight', () => {
  test('never more than the limit inside, each holder under its own rising token', async () => {
    const { lock } = setup();
    const pipeline = lock({ limit: 3 });
    const g = gate();
    const runs = Array.from({ length: 8 }, (_, i) => pipeline.execute(() => g.enter(i)));
    await flush();
    assert.deepEqual([...g.inside.keys()], [0, 1, 2]);
    const tokens = [];
    for (let i = 0; i < 8; i++) {
      await g.leave(i);
      assert.ok(g.inside.size <= 3);
    }
    for (const run of runs) tokens.push(await run);
    assert.equal(g.most(), 3);
    assert.deepEqual(g.order, [0, 1, 2, 3, 4, 5, 6, 7], 'first come, first in');
    assert.ok(tokens.every((t, i) => i === 0 || t > tokens[i - 1]), `tokens rise: ${tokens}`);
  });

  test('weights are summed, and a heavy waiter at the head is not overtaken', async () => {
    const { lock } = setup();
    const g = gate();
    const heavy = lock({ limit: 4, weight: 3 });
    const middle = lock({ limit: 4, weight: 2 });
    const light = lock({ limit: 4, weight: 1 });
    const runs = [heavy.execute(() => g.enter('a', 3)), middle.execute(() => g.enter('b', 2)), light.execute(() => g.enter('c', 1))];
    await flush();
    assert.deepEqual([...g.inside.keys()], ['a'], 'c would fit beside a, but b came first');
    await g.leave('a');
    assert.deepEqual([...g.inside.keys()], ['b', 'c']);
    await g.leave('b');
    await g.leave('c');
    await Promise.all(runs);
    assert.equal(g.mostWeight(), 3);
  });

  test('a holder that lapses gives its permits back; the others keep theirs', async () => {
    const { clock, store } = setup();
    const a = await acquireLock(store, 'k', 1_000, { limit: 2 });
    const b = await acquireLock(store, 'k', 5_000, { limit: 2 });
    assert.equal(await acquireLock(store, 'k', 1_000, { limit: 2 }), undefined, 'full');
    const waiting = acquireLock(store, 'k', 1_000, { limit: 2, wait: 10_000 });
    await advance(clock, 1_000);
    const c = await waiting;
    assert.ok(c.fencingToken > b.fencingToken && b.fencingToken > a.fencingToken);
    assert.equal(await a.release(), false, 'lapsed');
    assert.equal(await b.release(), true, 'b kept its own');
    assert.equal(await c.release(), true);
  });

  test('a lost holder is told on its own; the others run on', async () => {
    const { clock, store } = setup();
    const lost = [];
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'k', store, limit: 2, ttl: 3_000, onLockLost: ({ key }) => lost.push(key) })
      .build();
    const signals = [];
    const g = gate();
    const runs = [0, 1].map((i) =>
      pipeline.execute((context) => {
        signals.push(context.signal);
        return g.enter(i);
      }),
    );
    await flush();
    const holders = (await store.inspect('k')).holders;
    assert.equal(holders.length, 2);
    // Another owner takes one holder's permits from under it: the store is told that
    // holder's lease ended (a release by its owner id), and its renewal finds it gone.
    await store.release('k', holders[0].owner);
    await advance(clock, 1_000, 100);
    assert.deepEqual(lost, ['k']);
    assert.deepEqual(signals.map((s) => s.aborted), [true, false]);
    assert.ok(signals[0].reason instanceof LockLostError);
    await g.leave(0);
    await g.leave(1);
    // A callback that ignores its signal and succeeds keeps its value (as for any lock).
    assert.equal(typeof (await runs[0]), 'number');
    assert.equal(typeof (await runs[1]), 'number');
  });
});

describe('shared and exclusive', () => {
  test('readers run together, a writer alone, and a reader behind a waiting writer waits', async () => {
    const { lock, store } = setup();
    const read = lock({ mode: 'shared' });
    const write = lock({ mode: 'exclusive' });
    const g = gate();
    const runs = [
      read.execute(() => g.enter('r1')),
      read.execute(() => g.enter('r2')),
      write.execute(() => g.enter('w')),
      read.execute(() => g.enter('r3')),
    ];
    await flush();
    assert.deepEqual([...g.inside.keys()], ['r1', 'r2']);
    const seen = await store.inspect('k');
    assert.equal(seen.limit, SHARED_LIMIT);
    assert.deepEqual(seen.holders.map((h) => h.mode), ['shared', 'shared']);
    await g.leave('r1');
    assert.deepEqual([...g.inside.keys()], ['r2'], 'the writer waits for every reader');
    await g.leave('r2');
    assert.deepEqual([...g.inside.keys()], ['w']);
    await g.leave('w');
    assert.deepEqual([...g.inside.keys()], ['r3']);
    await g.leave('r3');
    const [r1, r2, w, r3] = await Promise.all(runs);
    assert.ok(w > r1 && w > r2, "a writer's token exceeds every reader's granted before it");
    assert.ok(r3 > w);
  });

  test('withLock takes the same options', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const g = gate();
    const runs = [1, 2].map((i) => withLock('doc', () => g.enter(i), { store, timeProvider: clock, mode: 'shared', wait: Infinity }));
    await flush();
    assert.equal(g.inside.size, 2);
    await g.leave(1);
    await g.leave(2);
    await Promise.all(runs);
  });
});

describe('a key has one limit', () => {
  test('a lock asking another limit than the holders use is told so, at once', async () => {
    const { lock, store } = setup();
    const g = gate();
    const held = lock({ limit: 3 }).execute(() => g.enter('a'));
    await flush();
    for (const [options, heldWith] of [
      [{ limit: 2 }, 3],
      [{}, 3],
      [{ mode: 'shared' }, 3],
    ]) {
      const error = await lock(options).execute(() => 'never').catch((e) => e);
      assert.ok(error instanceof LockLimitMismatchError, `${JSON.stringify(options)}: ${error}`);
      assert.equal(error.key, 'k');
      assert.equal(error.heldWith, heldWith);
      assert.match(error.message, /limit 3/);
    }
    await g.leave('a');
    await held;
    const plain = await acquireLock(store, 'k', 1_000);
    const error = await acquireLock(store, 'k', 1_000, { mode: 'exclusive' }).catch((e) => e);
    assert.ok(error instanceof LockLimitMismatchError);
    assert.equal(error.heldWith, 1);
    assert.equal(error.limit, SHARED_LIMIT);
    await plain.release();
  });

  test('the memory store answers { limit } when called directly', async () => {
    const { store } = setup();
    assert.ok((await store.acquire('x', 'a', 1_000, { limit: 2, weight: 1 })).fencingToken > 0);
    assert.deepEqual(await store.acquire('x', 'b', 1_000, { limit: 3, weight: 1 }), { limit: 2 });
    assert.deepEqual(await store.acquire('x', 'b', 1_000), { limit: 2 });
    assert.ok((await store.acquire('x', 'b', 1_000, { limit: 2, weight: 1 })).fencingToken > 0);
    assert.equal(await store.acquire('x', 'c', 1_000, { limit: 2, weight: 1 }), undefined, 'full');
    assert.equal(store.permits, true);
  });
});

describe('bad options', () => {
  test('are refused when the lock is built, naming the option', () => {
    const clock = new FakeTimeProvider();
    const build = (options) => new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k', ...options });
    assert.throws(() => build({ limit: 0 }), { name: 'RangeError', message: /limit must be from 1/ });
    assert.throws(() => build({ limit: 2.5 }), { name: 'TypeError', message: /limit must be an integer/ });
    assert.throws(() => build({ limit: '3' }), { name: 'TypeError', message: /limit must be an integer/ });
    assert.throws(() => build({ limit: 2, weight: 3 }), { name: 'RangeError', message: /weight must be from 1 to the limit \(2\)/ });
    assert.throws(() => build({ weight: 2 }), { name: 'RangeError', message: /weight must be from 1 to the limit \(1\)/ });
    assert.throws(() => build({ mode: 'read' }), { name: 'TypeError', message: /mode must be 'shared' or 'exclusive'/ });
    assert.throws(() => build({ mode: 'shared', limit: 3 }), { name: 'TypeError', message: /mode is not combined with limit/ });
    const plainStore = { acquire: async () => undefined, renew: async () => false, release: async () => false };
    assert.throws(() => build({ limit: 3, store: plainStore }), { name: 'TypeError', message: /limit needs a store that keeps permits/ });
    const modesOnly = { ...plainStore, permits: 'modes' };
    assert.throws(() => build({ limit: 3, store: modesOnly }), { name: 'TypeError', message: /keeps shared and exclusive modes only/ });
    build({ mode: 'shared', store: modesOnly });
    build({ limit: 1, store: plainStore }); // a limit of 1 is today's lock: any store
  });

  test('acquireLock and withLock check them the same way', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    await assert.rejects(acquireLock(store, 'k', 1_000, { limit: -1 }), { name: 'RangeError', message: /limit/ });
    await assert.rejects(withLock('k', () => 1, { store, timeProvider: clock, mode: 1 }), { name: 'TypeError', message: /mode/ });
  });
});

describe('beside the fast path', () => {
  test('a key held on the fast path by a plain lock is seen by a lock with permits', async () => {
    const { lock } = setup();
    const g = gate();
    const plain = lock({ wait: 0 }).execute(() => g.enter('plain'));
    await flush();
    const error = await lock({ limit: 2, wait: 0 }).execute(() => 'never').catch((e) => e);
    assert.ok(error instanceof LockLimitMismatchError, String(error));
    assert.equal(error.heldWith, 1);
    await g.leave('plain');
    await plain;
  });
});
