// The memory stores' fast path (lib/host/fast-path.cjs, core/src/fast_words.rs): a free
// key is granted without the engine and handed to the engine before anything else
// touches it. Each rule of docs/ARCHITECTURE.md "The fast path" is held here, on the
// engine this run uses. Runs once per engine.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import leasehold from 'leasehold';
import {
  engine,
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  getLockToken,
  acquireLock,
  withLock,
} from './support/leasehold.mjs';
import { flush, deferred } from './support/time.mjs';

const require = createRequire(import.meta.url);
const { bucketOf, TOKEN_WORD, BUSY_FIRST } = require('../lib/host/fast-path.cjs');
const { STORE_ID } = require('../lib/host/symbols.cjs');
const internals = leasehold[Symbol.for('leasehold.internals')];

const pipelineOn = (clock, lock, builder = {}) =>
  new ResiliencePipelineBuilder({ timeProvider: clock, ...builder }).addLock(lock).build();

/** How many keys of `store` (a MemoryLockStore) its host holds on the fast path. */
function fastHeld(clock, store) {
  const host = internals.hostOf(clock);
  return host.fast.held[storeIdOf(store)]?.size ?? 0;
}
const storeIdOf = (store) => store[STORE_ID];

/** The engine's record count for `key`'s bucket on `store`, read from the shared words. */
function busy(clock, store, key) {
  const host = internals.hostOf(clock);
  return host.fast.wordsNow()[BUSY_FIRST + bucketOf(storeIdOf(store), key)];
}

describe(`the fast path (${engine})`, () => {
  test("the host's bucket of a key is the engine's (the same FNV-1a as core/src/fast_words.rs)", () => {
    assert.equal(bucketOf(0, 'a'), 0xe40c292c & 1023);
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    for (const key of ['k', 'ключ-😀', 'job:42']) {
      assert.equal(busy(clock, store, key), 0);
      internals.call(() => internals.hostOf(clock).engine.memAcquire(storeIdOf(store), key, 'someone', 1000, 1, 1));
      assert.equal(busy(clock, store, key), 1, `the engine's lease on ${key} is seen in the host's bucket`);
    }
  });

  test('code after an un-awaited execute() sees the same state whether the key was free or held', async () => {
    for (const held of [false, true]) {
      const clock = new FakeTimeProvider();
      const store = new MemoryLockStore({ timeProvider: clock });
      const holder = pipelineOn(clock, { key: 'k', store });
      const release = deferred();
      const holding = held ? holder.execute(() => release.promise) : undefined;
      await flush();
      const pipeline = pipelineOn(clock, { key: 'k', store, wait: 10_000 });
      let ran = false;
      const done = pipeline.execute(() => {
        ran = true;
      });
      assert.equal(ran, false, `the callback ran inside execute() (key ${held ? 'held' : 'free'})`);
      await null;
      if (held) {
        release.resolve();
        await holding;
      }
      await done;
      assert.equal(ran, true);
    }
  });

  test('with ambientToken: false a fast hold runs its callback outside AsyncLocalStorage, token in its context', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const pipeline = pipelineOn(clock, { key: 'k', store }, { ambientToken: false });
    const seen = await pipeline.execute((ctx) => ({ ambient: getLockToken(), own: getLockToken(ctx), fast: fastHeld(clock, store) }));
    assert.equal(seen.ambient, undefined);
    assert.equal(typeof seen.own, 'number');
    assert.equal(seen.fast, 1);
  });

  test('withLock starts its function after it returned, free key or not', async () => {
    let ran = false;
    const done = withLock('fast:withLock', () => {
      ran = true;
      return getLockToken();
    });
    assert.equal(ran, false);
    assert.equal(typeof (await done), 'number');
  });

  test('withLock(key, fn) shares one pipeline: it checks each key, waits for a held one, and holds it on the fast path', async () => {
    await assert.rejects(withLock('', () => 'never'), { name: 'TypeError', message: 'key must be a non-empty string, got ""' });
    await assert.rejects(withLock('bad\uD800', () => 'never'), TypeError);
    const release = deferred();
    const order = [];
    const first = withLock('fast:shared', () => (order.push('first'), release.promise));
    const second = withLock('fast:shared', () => order.push('second'));
    await flush();
    assert.deepEqual(order, ['first'], 'the second call waits (wait defaults to the ttl)');
    release.resolve();
    await Promise.all([first, second]);
    assert.deepEqual(order, ['first', 'second']);
  });

  test('a free key is granted without an engine record; released, nothing stays', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const pipeline = pipelineOn(clock, { key: 'k', store });
    const release = deferred();
    const running = pipeline.execute(() => release.promise);
    assert.equal(fastHeld(clock, store), 1);
    assert.equal(busy(clock, store, 'k'), 0, 'the engine keeps no record of a fast hold');
    assert.equal(store.size, 1, 'size counts it');
    release.resolve('v');
    assert.equal(await running, 'v');
    assert.equal(fastHeld(clock, store), 0);
    assert.equal(store.size, 0);
    const host = internals.hostOf(clock);
    assert.equal(internals.call(() => host.engine.memEntries(storeIdOf(store))), 0);
    assert.equal(host.execs.size, 0);
  });

  test('a contender at a fast-held key waits in order and gets a larger token; one that cannot wait is refused', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const first = pipelineOn(clock, { key: 'k', store });
    const waiting = pipelineOn(clock, { key: 'k', store, wait: 60_000 });
    const release = deferred();
    let firstToken;
    const running = first.execute((ctx) => {
      firstToken = getLockToken(ctx);
      return release.promise;
    });
    await flush(1);
    await assert.rejects(first.execute(() => 'never'), LockNotAcquiredError);
    assert.equal(fastHeld(clock, store), 0, 'the contender handed the fast hold to the engine');
    const order = [];
    const second = waiting.execute((ctx) => order.push(['second', getLockToken(ctx)]));
    const third = waiting.execute((ctx) => order.push(['third', getLockToken(ctx)]));
    await flush();
    assert.deepEqual(order, []);
    release.resolve();
    await Promise.all([running, second, third]);
    assert.deepEqual(order.map(([who]) => who), ['second', 'third']);
    assert.ok(order[0][1] > firstToken && order[1][1] > order[0][1], JSON.stringify({ firstToken, order }));
    assert.equal(busy(clock, store, 'k'), 0, 'all released: the fast path may take the key again');
  });

  test("direct store calls see a fast-held key as held, with the lease's ttl", async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const pipeline = pipelineOn(clock, { key: 'k', store, ttl: 3000 });
    for (const call of ['isLocked', 'ttl', 'acquire', 'release', 'renew']) {
      const release = deferred();
      const running = pipeline.execute(() => release.promise);
      assert.equal(fastHeld(clock, store), 1, call);
      switch (call) {
        case 'isLocked':
          assert.equal(await store.isLocked('k'), true);
          break;
        case 'ttl':
          assert.equal(await store.ttl('k'), 3000);
          break;
        case 'acquire':
          assert.equal(await store.acquire('k', 'other', 1000), undefined);
          break;
        case 'release':
          assert.equal(await store.release('k', 'other'), false);
          assert.equal(await store.isLocked('k'), true);
          break;
        case 'renew':
          assert.equal(await store.renew('k', 'other', 1000), false);
          break;
      }
      assert.equal(fastHeld(clock, store), 0, `${call} handed the hold to the engine`);
      release.resolve();
      await running;
      assert.equal(await store.isLocked('k'), false, `released after ${call}`);
    }
  });

  test('a pipeline of several locks, or with telemetry, at a fast-held key hands it over first', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const events = [];
    const withTelemetry = pipelineOn(clock, { key: 'k', store }, { telemetry: (e) => events.push(e.type) });
    const nested = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'outer', store }).addLock({ key: 'k', store }).build();
    for (const contender of [withTelemetry, nested]) {
      const release = deferred();
      const running = pipelineOn(clock, { key: 'k', store }).execute(() => release.promise);
      assert.equal(fastHeld(clock, store), 1);
      await assert.rejects(contender.execute(() => 'never'), LockNotAcquiredError);
      assert.equal(fastHeld(clock, store), 0, 'handed over');
      release.resolve();
      await running;
      assert.equal(await contender.execute(() => 'free again'), 'free again');
    }
    assert.deepEqual(events, ['rejected', 'acquired', 'released']);
    assert.equal(store.size, 0);
  });

  test('the inner lock of an execution waiting for its outer one is not granted to two holders', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const outerHeld = deferred();
    const outerHolder = pipelineOn(clock, { key: 'outer', store }).execute(() => outerHeld.promise);
    const nested = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'outer', store, wait: 10_000 })
      .addLock({ key: 'inner', store, wait: 10_000 })
      .build();
    const inside = [];
    const nestedRun = nested.execute((ctx) => inside.push(['nested', getLockToken(ctx)]));
    await flush(1);
    // The nested execution waits for 'outer' in the engine; 'inner' is free meanwhile.
    const innerHeld = deferred();
    const innerHolder = pipelineOn(clock, { key: 'inner', store }).execute((ctx) => {
      inside.push(['holder', getLockToken(ctx)]);
      return innerHeld.promise;
    });
    await flush(1);
    assert.deepEqual(inside.map(([who]) => who), ['holder']);
    outerHeld.resolve();
    await outerHolder;
    await flush();
    assert.deepEqual(inside.map(([who]) => who), ['holder'], "the nested execution waits for 'inner' while it is held");
    innerHeld.resolve();
    await Promise.all([innerHolder, nestedRun]);
    assert.deepEqual(inside.map(([who]) => who), ['holder', 'nested']);
    assert.ok(inside[1][1] > inside[0][1], JSON.stringify(inside));
    assert.equal(busy(clock, store, 'inner'), 0, 'the inner key is free again: the fast path may take it');
    assert.equal(await pipelineOn(clock, { key: 'inner', store }).execute(() => fastHeld(clock, store)), 1);
  });

  test('a key whose bucket holds a key the engine knows takes the engine path, and still works', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const id = storeIdOf(store);
    // Two keys in one bucket: the busy count is per bucket, not per key.
    let other;
    for (let i = 0; other === undefined; i++) if (bucketOf(id, `c${i}`) === bucketOf(id, 'k') && `c${i}` !== 'k') other = `c${i}`;
    const lease = await acquireLock(store, other, 10_000, { timeProvider: clock });
    assert.equal(busy(clock, store, 'k'), 1);
    const release = deferred();
    const running = pipelineOn(clock, { key: 'k', store }).execute((ctx) => (getLockToken(ctx), release.promise));
    assert.equal(fastHeld(clock, store), 0, 'not on the fast path: the engine holds it');
    assert.equal(busy(clock, store, 'k'), 2);
    await assert.rejects(pipelineOn(clock, { key: 'k', store }).execute(() => 'never'), LockNotAcquiredError);
    release.resolve();
    await running;
    await lease.release();
    assert.equal(busy(clock, store, 'k'), 0);
    const again = pipelineOn(clock, { key: 'k', store }).execute(() => 'fast');
    assert.equal(fastHeld(clock, store), 1, 'the bucket is free again: the fast path');
    assert.equal(await again, 'fast');
  });

  test('a manual lease on a fast-held key waits for it, then gets a larger token', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const release = deferred();
    let token;
    const running = pipelineOn(clock, { key: 'k', store }).execute((ctx) => {
      token = getLockToken(ctx);
      return release.promise;
    });
    await flush(1);
    assert.equal(await acquireLock(store, 'k', 1000, { timeProvider: clock }), undefined, 'held: fail fast');
    const later = acquireLock(store, 'k', 1000, { timeProvider: clock, wait: 10_000 });
    release.resolve();
    await running;
    const lease = await later;
    assert.ok(lease.fencingToken > token);
    assert.equal(await lease.release(), true);
  });

  test('under FakeTimeProvider a fast hold is renewed as the engine would: ttl reads the same, it never lapses', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const release = deferred();
    const running = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(() => release.promise);
    clock.advance(2500);
    // Renewed every ttl/3: at 1000 and 2000, so the lease runs to 5000.
    assert.equal(await store.ttl('k'), 2500);
    clock.advance(10_000);
    assert.equal(await store.ttl('k'), 2500, 'renewed by the engine after the handover');
    // A fast hold that nobody asks about is not lost either, however long it runs.
    const other = deferred();
    const long = pipelineOn(clock, { key: 'k2', store, ttl: 3000 }).execute(() => other.promise);
    clock.advance(100_000);
    assert.equal(await store.isLocked('k2'), true);
    assert.equal(await store.ttl('k2'), 3000, 'renewed at 100000 exactly');
    other.resolve('done');
    release.resolve('done');
    assert.deepEqual(await Promise.all([running, long]), ['done', 'done']);
  });

  test('a waiter with a deadline at a fast-held key gives up at it, in fake time', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const release = deferred();
    const running = pipelineOn(clock, { key: 'k', store }).execute(() => release.promise);
    const waiter = pipelineOn(clock, { key: 'k', store, wait: 1000 }).execute(() => 'never').catch((e) => e);
    await flush();
    clock.advance(999);
    await flush();
    clock.advance(1);
    assert.ok((await waiter) instanceof LockNotAcquiredError);
    release.resolve();
    await running;
  });

  test('a key from operationKey or a key function takes the fast path too', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const byOperation = pipelineOn(clock, { store });
    const byFunction = pipelineOn(clock, { store, key: (ctx) => `fn:${ctx.operationKey}` });
    const release = deferred();
    const a = byOperation.execute(() => release.promise, { operationKey: 'op' });
    const b = byFunction.execute(() => release.promise, { operationKey: 'op' });
    assert.equal(fastHeld(clock, store), 2);
    assert.equal(await store.isLocked('op'), true);
    assert.equal(await store.isLocked('fn:op'), true);
    await assert.rejects(byOperation.execute(() => 'never', { operationKey: 'op' }), LockNotAcquiredError);
    release.resolve();
    await Promise.all([a, b]);
    assert.equal(store.size, 0);
  });

  test('nested locks: another key nests on the fast path; the same key is refused as before', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const outer = pipelineOn(clock, { key: 'outer', store });
    const inner = pipelineOn(clock, { key: 'inner', store });
    const tokens = await outer.execute(async (ctx) => {
      const outerToken = getLockToken(ctx);
      const innerToken = await inner.execute(() => getLockToken());
      const again = await outer.execute(() => 'never').catch((e) => e);
      return { outerToken, innerToken, after: getLockToken(), again };
    });
    assert.ok(tokens.innerToken > tokens.outerToken);
    assert.equal(tokens.after, tokens.outerToken, 'the outer token again after the inner lock');
    assert.ok(tokens.again instanceof LockNotAcquiredError);
    assert.equal(store.size, 0);
  });

  test('an abort before the callback starts rejects with its reason and frees the key; one while it runs aborts its signal', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const pipeline = pipelineOn(clock, { key: 'k', store });
    const early = new AbortController();
    let ran = false;
    const aborted = pipeline.execute(() => (ran = true), { signal: early.signal });
    early.abort(new Error('caller gave up'));
    await assert.rejects(aborted, /caller gave up/);
    assert.equal(ran, false);
    assert.equal(await store.isLocked('k'), false);

    const late = new AbortController();
    const seen = pipeline.execute(
      async (ctx) => {
        await null;
        late.abort(new Error('stop'));
        return ctx.signal.aborted && ctx.signal.reason.message;
      },
      { signal: late.signal },
    );
    assert.equal(await seen, 'stop');
    assert.equal(await store.isLocked('k'), false);
  });

  test('a callback that throws, synchronously or not, rejects with its error and frees the key', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const pipeline = pipelineOn(clock, { key: 'k', store });
    await assert.rejects(
      pipeline.execute(() => {
        throw new Error('sync');
      }),
      /sync/,
    );
    await assert.rejects(
      pipeline.execute(async () => {
        throw new Error('async');
      }),
      /async/,
    );
    await assert.rejects(withLock('k', () => Promise.reject(new Error('withLock')), { store, timeProvider: clock }), /withLock/);
    assert.equal(store.size, 0);
    assert.equal(await pipeline.execute(() => 'again'), 'again');
  });

  test('tokens rise on one key across fast grants, engine grants, manual leases and direct acquires', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const fast = pipelineOn(clock, { key: 'k', store });
    const slow = pipelineOn(clock, { key: 'k', store }, { telemetry: () => {} });
    const tokens = [];
    for (let round = 0; round < 5; round++) {
      tokens.push(await fast.execute((ctx) => getLockToken(ctx)));
      tokens.push(await slow.execute((ctx) => getLockToken(ctx)));
      const lease = await acquireLock(store, 'k', 1000, { timeProvider: clock });
      tokens.push(lease.fencingToken);
      await lease.release();
      const direct = await store.acquire('k', 'me', 1000);
      tokens.push(direct.fencingToken);
      await store.release('k', 'me');
      tokens.push(await withLock('k', (ctx) => getLockToken(ctx), { store, timeProvider: clock }));
      // A contended round: the fast holder is handed over and the waiter granted by the engine.
      const release = deferred();
      const held = fast.execute((ctx) => (tokens.push(getLockToken(ctx)), release.promise));
      await flush(1);
      const waiter = pipelineOn(clock, { key: 'k', store, wait: 1000 }).execute((ctx) => getLockToken(ctx));
      release.resolve();
      await held;
      tokens.push(await waiter);
    }
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], JSON.stringify(tokens));
  });

  test('the shared words survive the engine growing its memory (wasm detaches old views)', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const pipeline = pipelineOn(clock, { store });
    const host = internals.hostOf(clock);
    assert.ok(await pipeline.execute(() => true, { operationKey: 'before' }));
    const before = host.fast.words;
    // Large keys held in the engine make its memory grow.
    const big = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 64; i++) await store.acquire(`${big}${i}`, 'me', 60_000);
    if (engine === 'wasm') assert.equal(before.length, 0, 'the grown memory detached the first view');
    const tokens = [];
    for (let i = 0; i < 3; i++) tokens.push(await pipeline.execute((ctx) => getLockToken(ctx), { operationKey: `after${i}` }));
    assert.ok(tokens[0] > 65 && tokens[1] > tokens[0], JSON.stringify(tokens));
    assert.equal(host.fast.words[TOKEN_WORD], tokens[2], 'the host reads the live token word');
  });

  test('fast holds of a retired engine are told, as its executions are', async () => {
    const clock = new FakeTimeProvider();
    const host = internals.hostOf(clock);
    const release = deferred();
    let signal;
    const running = pipelineOn(clock, { key: 'held' }).execute((ctx) => {
      signal = ctx.signal;
      return release.promise;
    });
    await flush(1);
    host.die(new Error('forced engine failure'));
    await assert.rejects(running, /forced engine failure/);
    assert.equal(signal.aborted, true);
    release.resolve();
  });
});
