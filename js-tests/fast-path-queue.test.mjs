// The fast path's queue (lib/host/fast-path.cjs): executions that wait for a key held on
// the fast path queue behind its holder and take the key from it, in order, under rising
// tokens, with no engine record; anything else that wants the key (a deadline that comes,
// a wait of 0, an abort, a direct store call, an inspection, a retired engine) sends the
// holder and its queue to the engine, where they go on in the same order.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import leasehold from 'leasehold';
import {
  engine,
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  getLockToken,
  withLock,
} from './support/leasehold.mjs';
import { flush, deferred } from './support/time.mjs';

const require = createRequire(import.meta.url);
const { bucketOf, BUSY_FIRST } = require('../lib/host/fast-path.cjs');
const { STORE_ID } = require('../lib/host/symbols.cjs');
const internals = leasehold[Symbol.for('leasehold.internals')];

function setup(builder = {}) {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const host = internals.hostOf(clock);
  const pipeline = (lock = {}) =>
    new ResiliencePipelineBuilder({ timeProvider: clock, ...builder }).addLock({ key: 'k', store, wait: Infinity, ...lock }).build();
  const busy = () => host.fast.wordsNow()[BUSY_FIRST + bucketOf(store[STORE_ID], 'k')];
  return { clock, store, host, pipeline, busy };
}

/**
 * Starts `count` executions of `pipeline` on its key, each holding it until its release
 * is called; returns their promises, the order they ran in and their tokens.
 */
function queue(pipeline, count, first = 0) {
  const ran = [];
  const tokens = [];
  const releases = [];
  const done = [];
  for (let i = first; i < first + count; i++) {
    const release = deferred();
    releases.push(release);
    done.push(
      pipeline.execute((context) => {
        ran.push(i);
        tokens.push(getLockToken(context));
        return release.promise;
      }),
    );
  }
  return { ran, tokens, releases, done };
}

describe(`the fast path's queue (${engine})`, () => {
  test('waiters without a deadline take the key in order, under rising tokens, with no engine record', async () => {
    const { host, pipeline, busy, store } = setup();
    const p = pipeline();
    const { ran, tokens, releases, done } = queue(p, 16);
    await flush(1);
    assert.deepEqual(ran, [0]);
    for (let i = 1; i < 16; i++) {
      assert.equal(host.execs.size, 0, 'a queued execution is not in the engine');
      assert.equal(busy(), 0, "the key's bucket stays free of engine records");
      releases[i - 1].resolve(i - 1);
      await flush(1);
      assert.deepEqual(ran, Array.from({ length: i + 1 }, (_, j) => j), 'the next in line runs, and only it');
    }
    releases[15].resolve(15);
    assert.deepEqual(await Promise.all(done), Array.from({ length: 16 }, (_, i) => i));
    for (let i = 1; i < tokens.length; i++) assert.equal(tokens[i], tokens[i - 1] + 1, 'each holder gets the next token');
    assert.equal(store.size, 0);
    assert.equal(await store.isLocked('k'), false);
  });

  test('a waiter with a deadline queues too; at its deadline the engine times it out', async () => {
    const { host, pipeline, clock, busy } = setup();
    const { ran, tokens, releases, done } = queue(pipeline(), 2);
    const timed = queue(pipeline({ wait: 1000 }), 1, 2);
    const after = queue(pipeline(), 1, 3);
    await flush(1);
    clock.advance(999);
    await flush(1);
    assert.equal(host.execs.size, 0, 'all four still wait in the host');
    assert.equal(busy(), 0);
    clock.advance(1);
    await assert.rejects(timed.done[0], LockNotAcquiredError);
    assert.ok(busy() > 0, 'at the deadline the queue went to the engine');
    for (const release of [...releases, ...after.releases]) {
      release.resolve();
      await flush(2);
    }
    await Promise.all([...done, ...after.done]);
    assert.deepEqual([...ran, ...timed.ran, ...after.ran], [0, 1, 3]);
    const all = [...tokens, ...after.tokens];
    for (let i = 1; i < all.length; i++) assert.ok(all[i] > all[i - 1], `token ${all[i]} after ${all[i - 1]}`);
    assert.equal(host.execs.size, 0);
  });

  test('a waiter served before its deadline never reaches the engine', async () => {
    const { host, pipeline, clock, busy } = setup();
    const { ran, releases, done } = queue(pipeline({ wait: 1000 }), 2);
    await flush(1);
    clock.advance(600);
    releases[0].resolve();
    await flush(2);
    // Past the deadline it no longer has: nothing is handed over, nothing times out.
    clock.advance(600);
    await flush(1);
    assert.deepEqual(ran, [0, 1]);
    assert.equal(host.execs.size, 0);
    assert.equal(busy(), 0);
    assert.equal(host.fast.expiring.size, 0, 'no deadline is kept for an empty queue');
    releases[1].resolve();
    await Promise.all(done);
    assert.equal(host.execs.size, 0);
  });

  test('a waiter that does not wait (wait: 0) sends the queue to the engine, which refuses it', async () => {
    const { host, pipeline, busy } = setup();
    const { ran, releases, done } = queue(pipeline(), 3);
    await flush(1);
    await assert.rejects(pipeline({ wait: 0 }).execute(() => 'never'), LockNotAcquiredError);
    assert.ok(busy() > 0);
    assert.equal(host.execs.size, 3);
    for (const release of releases) {
      release.resolve();
      await flush(2);
    }
    await Promise.all(done);
    assert.deepEqual(ran, [0, 1, 2]);
  });

  test('on the system clock, withLock waits its wait in the queue, then is refused', async () => {
    const hold = deferred();
    const key = `queue-system-${process.pid}`;
    const held = withLock(key, () => hold.promise);
    await flush(1);
    const started = performance.now();
    const error = await withLock(key, () => 'never', { wait: 40 }).catch((e) => e);
    const waited = performance.now() - started;
    assert.ok(error instanceof LockNotAcquiredError, `got ${error}`);
    assert.ok(waited >= 30, `refused after ${waited} ms, before its wait of 40 ms`);
    const served = withLock(key, () => 'served', { wait: 60_000 });
    hold.resolve();
    await held;
    assert.equal(await served, 'served');
  });

  test('an aborted waiter leaves the queue with its reason; the others keep their order', async () => {
    const { host, pipeline, store } = setup();
    const p = pipeline();
    const { ran, releases, done } = queue(p, 2);
    const controller = new AbortController();
    const aborted = p.execute(() => ran.push('aborted'), { signal: controller.signal });
    const after = queue(p, 2, 2);
    await flush(1);
    controller.abort(new Error('caller gave up'));
    await assert.rejects(aborted, /caller gave up/);
    for (const release of [...releases, ...after.releases]) {
      release.resolve();
      await flush(2);
    }
    await Promise.all([...done, ...after.done]);
    assert.deepEqual([...ran, ...after.ran].sort(), [0, 1, 2, 3]);
    assert.deepEqual(ran.concat(after.ran), [0, 1, 2, 3], 'in their order');
    assert.equal(host.execs.size, 0);
    assert.equal(store.size, 0);
  });

  test('an inspection and a direct store call see the queued waiters, which go on in order', async () => {
    const { store, pipeline } = setup();
    const { ran, releases, done } = queue(pipeline(), 3);
    await flush(1);
    const seen = await store.inspect('k');
    assert.equal(seen.holders.length, 1);
    assert.equal(seen.waiters.length, 2, 'both queued waiters are shown');
    assert.equal(await store.isLocked('k'), true);
    for (const release of releases) {
      release.resolve();
      await flush(2);
    }
    await Promise.all(done);
    assert.deepEqual(ran, [0, 1, 2]);
  });

  test('a callback that throws, or returns at once, passes the key on', async () => {
    const { pipeline, host } = setup();
    const p = pipeline();
    const hold = deferred();
    const first = p.execute(() => hold.promise);
    const order = [];
    const throwing = p.execute(() => {
      order.push('throws');
      throw new Error('callback failed');
    });
    const sync = p.execute(() => order.push('sync'));
    const last = p.execute(async () => order.push('async'));
    hold.resolve();
    await first;
    await assert.rejects(throwing, /callback failed/);
    await Promise.all([sync, last]);
    assert.deepEqual(order, ['throws', 'sync', 'async']);
    assert.equal(host.execs.size, 0);
  });

  test('each callback runs in the async context of its own caller', async () => {
    const { pipeline } = setup();
    const p = pipeline();
    const als = new AsyncLocalStorage();
    const seen = [];
    const hold = deferred();
    const first = als.run('holder', () => p.execute(() => hold.promise));
    const waiters = ['a', 'b', 'c'].map((name) => als.run(name, () => p.execute(() => seen.push(als.getStore()))));
    hold.resolve();
    await Promise.all([first, ...waiters]);
    assert.deepEqual(seen, ['a', 'b', 'c']);
  });

  test('a long chain of synchronous callbacks does not nest (ambientToken: false)', async () => {
    const { pipeline, host } = setup({ ambientToken: false });
    const p = pipeline();
    const hold = deferred();
    const first = p.execute(() => hold.promise);
    let count = 0;
    const chain = Array.from({ length: 5000 }, () => p.execute(() => count++));
    hold.resolve();
    await Promise.all([first, ...chain]);
    assert.equal(count, 5000);
    assert.equal(host.execs.size, 0);
  });

  test('a retired engine rejects the holder and every queued waiter; none of them runs', async () => {
    const { pipeline, host } = setup();
    const p = pipeline();
    const hold = deferred();
    const first = p.execute(() => hold.promise);
    await flush(1);
    let ran = 0;
    const waiters = Array.from({ length: 3 }, () => p.execute(() => ran++));
    host.die(new Error('forced engine failure'));
    await assert.rejects(first, /forced engine failure/);
    for (const waiter of waiters) await assert.rejects(waiter, /forced engine failure/);
    hold.resolve();
    await flush();
    assert.equal(ran, 0);
  });
});
