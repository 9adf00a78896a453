// A fast hold handed to the engine at awkward moments (lib/host/fast-path.cjs): by the
// holder's own code while it runs, by user code the engine calls while it applies
// effects, after its caller aborted, when its engine is retired, after fake time jumped.
// Each case must end with the key free, nothing left in the host, and the execution
// settled as the engine path would settle it.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import leasehold from 'leasehold';
import { engine, ResiliencePipelineBuilder, MemoryLockStore, FakeTimeProvider, getLockToken, LockNotAcquiredError } from './support/leasehold.mjs';
import { flush, deferred } from './support/time.mjs';

const internals = leasehold[Symbol.for('leasehold.internals')];
const pipelineOn = (clock, lock, builder = {}) =>
  new ResiliencePipelineBuilder({ timeProvider: clock, ...builder }).addLock(lock).build();

/** A fake clock and a memory store on it, with a check that nothing is left on either. */
function setup() {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const host = internals.hostOf(clock);
  const nothingLeft = async (key) => {
    assert.equal(await store.isLocked(key), false, `'${key}' is free`);
    assert.equal(store.size, 0, 'no lease is left');
    assert.equal(host.execs.size, 0, 'no execution is left');
  };
  return { clock, store, host, nothingLeft };
}

describe(`fast holds handed over at awkward moments (${engine})`, () => {
  test('a thenable whose `then` getter hands its own hold over settles through the engine', async () => {
    const { clock, store, nothingLeft } = setup();
    const value = await pipelineOn(clock, { key: 'k', store }).execute(() => ({
      get then() {
        store.isLocked('k');
        return (resolve) => resolve('resolved');
      },
    }));
    assert.equal(value, 'resolved');
    await nothingLeft('k');
  });

  test('a callback that hands its own hold over and throws rejects with its error, the key released', async () => {
    const { clock, store, nothingLeft } = setup();
    const failing = pipelineOn(clock, { key: 'k', store }).execute(() => {
      store.isLocked('k');
      throw new Error('thrown after the handover');
    });
    await assert.rejects(failing, /thrown after the handover/);
    await nothingLeft('k');
  });

  test('a hold handed over before its callback started, then aborted, never runs and lets the waiter in', async () => {
    const { clock, store, nothingLeft } = setup();
    const controller = new AbortController();
    let ran = false;
    const aborted = pipelineOn(clock, { key: 'k', store }).execute(() => (ran = true), { signal: controller.signal });
    // A waiter hands the fast hold over before its callback's microtask.
    const waiter = pipelineOn(clock, { key: 'k', store, wait: 1000 }).execute((ctx) => getLockToken(ctx));
    controller.abort(new Error('caller gave up'));
    await assert.rejects(aborted, /caller gave up/);
    assert.equal(ran, false);
    assert.equal(typeof (await waiter), 'number');
    await nothingLeft('k');
  });

  test('telemetry that calls the store on a fast-held key while the engine applies effects sees it held', async () => {
    const { clock, store } = setup();
    const release = deferred();
    const holder = pipelineOn(clock, { key: 'k', store }).execute((ctx) => release.promise.then(() => getLockToken(ctx)));
    await flush(1);
    const answers = [];
    const observed = pipelineOn(clock, { key: 'other', store }, { telemetry: () => answers.push(store.acquire('k', 'telemetry', 1000)) });
    await observed.execute(() => 'observed');
    assert.ok(answers.length > 0);
    assert.deepEqual(await Promise.all(answers), answers.map(() => undefined), "'k' is held: no telemetry acquire gets it");
    release.resolve();
    const token = await holder;
    const after = await store.acquire('k', 'me', 1000);
    assert.ok(after.fencingToken > token, 'the next lease has a larger token');
  });

  test('a retired engine rejects fast holds whether queued to start, running, or handed over', async () => {
    const { clock, store, host } = setup();
    let ran = 0;
    const release = deferred();
    const running = pipelineOn(clock, { key: 'running', store }).execute(() => release.promise);
    await flush(1);
    const queued = pipelineOn(clock, { key: 'queued', store }).execute(() => ran++);
    const handedOver = pipelineOn(clock, { key: 'handed', store }).execute(() => ran++);
    store.isLocked('handed');
    host.die(new Error('forced engine failure'));
    await assert.rejects(running, /forced engine failure/);
    await assert.rejects(queued, /forced engine failure/);
    await assert.rejects(handedOver, /forced engine failure/);
    release.resolve();
    await flush();
    assert.equal(ran, 0, 'no callback starts on a retired engine');
  });

  test("a retired engine's fast holds are told, also when another holder's onLockLost calls the store", async () => {
    const { clock, store, host } = setup();
    const release = deferred();
    const touched = [];
    // An engine-run holder (telemetry keeps it off the fast path) whose onLockLost asks about 'fast'.
    const onLockLost = () => touched.push(store.isLocked('fast').catch((error) => error));
    const engineRun = pipelineOn(clock, { key: 'engine', store, onLockLost }, { telemetry: () => {} }).execute(() => release.promise);
    let signal;
    const fast = pipelineOn(clock, { key: 'fast', store }).execute((ctx) => {
      signal = ctx.signal;
      return release.promise;
    });
    await flush(1);
    host.die(new Error('forced engine failure'));
    assert.equal(touched.length, 1, "the engine-run holder's onLockLost ran");
    assert.equal(signal.aborted, true, 'the fast holder is told its lock is lost');
    await assert.rejects(engineRun, /forced engine failure/);
    await assert.rejects(fast, /forced engine failure/);
    release.resolve();
    await Promise.all(touched);
  });

  test('in fake time a fast hold reads, renews and is lost as an engine-run one, whatever the ttl', async () => {
    const differences = [];
    for (const ttl of [1, 2, 3, 10, 3000]) {
      for (const steps of [[1], [2, 3], [ttl - 1, 1], [3 * ttl + 1]]) {
        const seen = {};
        for (const path of ['fast', 'engine']) {
          const clock = new FakeTimeProvider(1000);
          const store = new MemoryLockStore({ timeProvider: clock });
          const release = deferred();
          let lost = false;
          // Telemetry keeps an execution off the fast path.
          const builder = path === 'engine' ? { telemetry: () => {} } : {};
          const holder = pipelineOn(clock, { key: 'k', store, ttl, onLockLost: () => (lost = true) }, builder).execute(() => release.promise);
          await flush(1);
          const ttls = [];
          for (const step of steps) {
            clock.advance(step);
            ttls.push(await store.ttl('k'));
          }
          release.resolve();
          await holder;
          seen[path] = JSON.stringify({ ttls, lost });
        }
        if (seen.fast !== seen.engine) differences.push(`ttl ${ttl}, steps ${steps}: fast ${seen.fast}, engine ${seen.engine}`);
      }
    }
    assert.deepEqual(differences, []);
  });

  test('a fast hold across a fake-time jump far beyond its ttl is still held, with the renewed ttl', async () => {
    const { clock, store, nothingLeft } = setup();
    const release = deferred();
    const holder = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(() => release.promise);
    clock.advance(1e12 + 1500);
    // Renewed every 1000 ms since 0: last at 1e12 + 1000, so the lease runs to 1e12 + 4000.
    assert.equal(await store.acquire('k', 'other', 100), undefined);
    assert.equal(await store.ttl('k'), 2500);
    clock.advance(10_000);
    await assert.rejects(pipelineOn(clock, { key: 'k', store }).execute(() => 'never'), LockNotAcquiredError);
    release.resolve('held throughout');
    assert.equal(await holder, 'held throughout');
    await nothingLeft('k');
  });
});
