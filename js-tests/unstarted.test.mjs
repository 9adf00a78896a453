// Grants that end before their holder starts (issue 33): an acquireLock granted the key
// and over within one advance of fake time resolves to a handle already over, never
// `undefined`; a caller that aborts before its callback starts gets its own reason, even
// when the lease lapsed meanwhile; an outer lock lost before the callback starts says so.
// Run: node --test js-tests/unstarted.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  FakeTimeProvider,
  LockLostError,
  MemoryLockStore,
  ResiliencePipelineBuilder,
  acquireLock,
} from 'leasehold';
import { recordingStore } from './support/stores.mjs';
import { flush } from './support/time.mjs';

describe('acquireLock granted and over in one advance', () => {
  test("wait: Infinity resolves to a handle already over, not 'held'", async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const a = await acquireLock(store, 'k', 100);
    const bPromise = acquireLock(store, 'k', 10, { wait: Infinity });
    clock.advance(50);
    await flush();
    clock.advance(60); // granted at 100, over at 110: both in this advance
    const b = await bPromise;
    assert.ok(b, 'granted: never undefined');
    assert.equal(b.key, 'k');
    assert.equal(b.fencingToken, a.fencingToken + 1, 'the token it was granted');
    assert.equal(typeof b.owner, 'string');
    assert.equal(b.signal.aborted, true, 'over before it was handed out');
    assert.ok(b.signal.reason instanceof LockLostError);
    assert.equal(await b.extend(), false);
    assert.equal(await b.release(), false);
    assert.equal(await store.isLocked('k'), false, 'nothing left behind');
    const c = await acquireLock(store, 'k', 10);
    assert.equal(c.fencingToken, b.fencingToken + 1);
    await c.release();
  });
});

describe('an abort before the callback starts', () => {
  test('rejects with the reason even though the lease lapsed first (real clock)', async () => {
    const store = new MemoryLockStore();
    const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: 30, store, wait: Infinity }).build();
    const a = await acquireLock(store, 'k', 10_000);
    const controller = new AbortController();
    let ran = false;
    const execution = pipeline.execute(
      () => {
        ran = true;
      },
      { signal: controller.signal },
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    a.release(); // grants the waiter: its callback is to start from a promise job
    const until = Date.now() + 40;
    while (Date.now() < until); // its 30 ms lease lapses first
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await assert.rejects(execution, (error) => error === reason);
    assert.equal(ran, false);
    assert.equal(await store.isLocked('k'), false);
  });

  test('rejects with the reason after a loss found by the engine (fake clock)', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { renew: () => new Promise(() => {}) });
    const reason = new Error('caller gave up');
    const controller = new AbortController();
    // Right after the grant, before the callback's own job: the lease lapses (its
    // renewal never answered), then the caller aborts.
    const telemetry = (event) => {
      if (event.type !== 'acquired') return;
      queueMicrotask(() => {
        clock.advance(40);
        controller.abort(reason);
      });
    };
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry })
      .addLock({ key: 'k', ttl: 30, store })
      .build();
    let ran = false;
    const execution = pipeline.execute(
      () => {
        ran = true;
      },
      { signal: controller.signal },
    );
    await assert.rejects(execution, (error) => error === reason);
    assert.equal(ran, false);
  });

  test('a two-lock pipeline whose outer lock is lost before the callback starts says so', async () => {
    const clock = new FakeTimeProvider();
    const outerStore = recordingStore(clock, { renew: async () => false });
    const inner = new MemoryLockStore({ timeProvider: clock });
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'outer', ttl: 3_000, store: outerStore })
      .addLock({ key: 'inner', ttl: 30_000, store: inner, wait: 60_000 })
      .build();
    const holder = await acquireLock(inner, 'inner', 30_000);
    let ran = false;
    const execution = pipeline.execute(() => {
      ran = true;
    });
    execution.catch(() => {});
    await flush();
    clock.advance(1_000); // the outer renewal is refused while the inner lock waits
    await flush();
    await assert.rejects(execution, (error) => {
      assert.ok(error instanceof LockLostError);
      assert.equal(error.key, 'outer');
      assert.match(error.message, /before the callback started/);
      return true;
    });
    assert.equal(ran, false);
    await holder.release();
  });
});
