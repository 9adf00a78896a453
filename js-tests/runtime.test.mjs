// Host-level guarantees: panics, process lifetime, memory. Runs once per engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import api, { ResiliencePipelineBuilder, FakeTimeProvider, MemoryLockStore, acquireLock, getLockToken } from 'leasehold';

const internals = api[Symbol.for('leasehold.internals')];
const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs `script` (an ES module) in a fresh Node process from the project root; fails the
 * test unless it exits 0. `gc`: with `globalThis.gc`.
 */
function runScript(script, { env = process.env, gc = false } = {}) {
  const flags = gc ? ['--expose-gc'] : [];
  const child = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', script], {
    cwd: root,
    env,
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(child.status, 0, child.stderr);
  return child;
}

test('a Rust panic surfaces as an Error and the process lives on', async () => {
  const engine = new internals.binding.Engine(true, 0, new Uint8Array(32));
  let error;
  try {
    internals.call(() => engine.panicForTests());
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof Error, String(error));
  assert.equal(error.code, 'LEASEHOLD_ENGINE_FAILURE');
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: new FakeTimeProvider() }).addLock({ key: 'k' }).build();
  assert.equal(await pipeline.execute(() => 'still alive'), 'still alive');
});

/** Runs `panicForTests` in a fresh process; what it wrote to stderr and the Error's message. */
function panicInChild(env) {
  const script = `
    import api from 'leasehold';
    const internals = api[Symbol.for('leasehold.internals')];
    const engine = new internals.binding.Engine(true, 0, new Uint8Array(32));
    try {
      internals.call(() => engine.panicForTests());
    } catch (error) {
      console.log(JSON.stringify({ code: error.code, message: error.message }));
    }
  `;
  const child = runScript(script, { env });
  return { stderr: child.stderr, error: JSON.parse(child.stdout) };
}

test("a caught panic writes nothing to stderr; its Error carries the panic's message", () => {
  const env = { ...process.env };
  delete env.RUST_BACKTRACE;
  const { stderr, error } = panicInChild(env);
  assert.equal(stderr, '');
  assert.equal(error.code, 'LEASEHOLD_ENGINE_FAILURE');
  assert.match(error.message, /^leasehold engine failure: leasehold: a panic forced by a test/);
});

test('with RUST_BACKTRACE set, the native engine prints a panic as Rust does', { skip: api.engine !== 'native' }, () => {
  const { stderr, error } = panicInChild({ ...process.env, RUST_BACKTRACE: '1' });
  assert.match(stderr, /panicked at .*\n.*a panic forced by a test/);
  assert.equal(error.code, 'LEASEHOLD_ENGINE_FAILURE');
});

test('an engine failure while handing a manual lease over rejects its acquireLock and frees the key', async () => {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const first = await acquireLock(store, 'k', '10s');
  const waiting = acquireLock(store, 'k', '10s', { wait: '5s' });
  // The engine call that reads the waiter's owner fails once, as a caught panic does
  // (its token comes with the grant).
  const engine = internals.hostOf(clock).engine;
  const layerOwner = engine.layerOwner;
  engine.layerOwner = function failingOnce() {
    engine.layerOwner = layerOwner;
    throw new Error('leasehold: a failure forced by a test');
  };
  await first.release();
  await assert.rejects(waiting, /forced by a test/);
  assert.equal(engine.layerOwner, layerOwner, 'the handover read the owner');
  const again = await acquireLock(store, 'k', '10s');
  assert.ok(again, 'the lease the waiter could not take was handed back');
  assert.equal(await again.release(), true);
});

test('a lock handed over runs under its token without asking the engine for it', async () => {
  const clock = new FakeTimeProvider();
  const pipeline = (wait) => new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k', wait }).build();
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const first = pipeline(0).execute(() => gate.then(() => getLockToken()));
  const second = pipeline('5s').execute(() => getLockToken());
  const engine = internals.hostOf(clock).engine;
  const token = engine.token;
  // The finish that hands the key on names the next holder and leaves its token in the
  // words shared with the host (core/src/fast_words.rs): no call per handover.
  engine.token = () => {
    throw new Error('leasehold: the handover asked the engine for the token');
  };
  try {
    open();
    const [a, b] = await Promise.all([first, second]);
    assert.equal(b, a + 1, 'the next token, as the engine granted it');
  } finally {
    engine.token = token;
  }
  assert.equal(await pipeline(0).execute(() => 'free'), 'free');
});

/** A store written in JavaScript (not the built-in one): leases in a Map, no expiry. */
function mapStore() {
  const leases = new Map();
  let token = 0;
  return {
    leases,
    calls: [],
    async acquire(key, owner) {
      this.calls.push(['acquire', key, owner]);
      if (leases.has(key)) return undefined;
      leases.set(key, owner);
      return { fencingToken: ++token };
    },
    async renew(key, owner) {
      return leases.get(key) === owner;
    },
    async release(key, owner) {
      this.calls.push(['release', key, owner]);
      if (leases.get(key) !== owner) return false;
      leases.delete(key);
      return true;
    },
  };
}

// With telemetry, a synchronous callback's release comes as an effect, not in a status
// word: both ways read the key and owner from the engine when the acquire's are gone.
for (const [what, acquiring, telemetry] of [
  ['acquire', true, false],
  ['release', false, false],
  ['release sent as an effect', false, true],
]) {
  test(`an engine failure while reading the owner for a JavaScript store's ${what} settles the execution`, async () => {
    const clock = new FakeTimeProvider();
    const store = mapStore();
    const events = [];
    const options = telemetry ? { timeProvider: clock, telemetry: (e) => events.push(e.type) } : { timeProvider: clock };
    const pipeline = new ResiliencePipelineBuilder(options).addLock({ key: 'k', store }).build();
    assert.equal(await pipeline.execute(() => 'warm'), 'warm');
    const engine = internals.hostOf(clock).engine;
    const layerOwner = engine.layerOwner;
    const layerKey = engine.layerKey;
    const failing = function failingOnce() {
      engine.layerOwner = layerOwner;
      engine.layerKey = layerKey;
      throw new Error('leasehold: a failure forced by a test');
    };
    if (acquiring) {
      engine.layerOwner = failing;
      // Told as a failed acquire: the store error says which call, its cause what failed.
      await assert.rejects(pipeline.execute(() => 'never'), (error) => {
        assert.match(error.message, /acquire\('k'\)/);
        assert.match(error.cause?.message, /forced by a test/);
        return true;
      });
      assert.equal(engine.layerOwner, layerOwner, 'the acquire read the owner');
      // No acquire went out without an owner. The engine cannot tell this failure from a
      // store's that may have taken the lease: it sends its owner-checked clean-up release.
      assert.deepEqual(store.calls.slice(2).map(([method]) => method), ['release'], 'no acquire without an owner');
    } else {
      // The release reads the key and owner its acquire kept; without them, from the engine.
      let rec;
      const running = pipeline.execute(() => {
        rec = [...internals.hostOf(clock).execs.values()][0];
        rec.lockText = undefined;
        engine.layerOwner = failing;
        engine.layerKey = failing;
        return 'ran';
      });
      assert.equal(await running, 'ran', 'a failed release does not fail the execution');
      assert.ok(rec, 'the callback ran');
      assert.equal(engine.layerKey, layerKey, 'the release asked the engine for the key');
      assert.deepEqual(store.calls.slice(2).map(([method]) => method), ['acquire'], 'the store was not asked to release');
      if (telemetry) assert.ok(events.includes('releaseFailed'), events.join(' '));
    }
    assert.equal(internals.hostOf(clock).execs.size, 0, 'no execution record is left');
    // The engine lives on, and knows nothing is pending for the key on its side.
    if (!acquiring) store.leases.clear(); // the release never reached the store
    assert.equal(await pipeline.execute(() => 'again'), 'again');
    assert.equal(store.leases.size, 0);
  });
}

/**
 * Runs `script` (an ES module that prints `exit-after <ms>` on exit) in a child Node and
 * checks that it exits on its own, long before a renewal timer of its 1-minute lease
 * (20 s) would fire.
 */
function exitsLongBeforeRenewal(script) {
  const t0 = Date.now();
  const child = runScript(script);
  assert.match(child.stdout, /exit-after \d+/);
  assert.ok(Date.now() - t0 < 10_000, `exited after ${Date.now() - t0} ms`);
}

test('no engine timer keeps the process alive once the last execution settles', () => {
  const script = `
    import { ResiliencePipelineBuilder } from 'leasehold';
    const p = new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: '1m' }).build();
    const started = Date.now();
    await p.execute(() => new Promise((r) => setTimeout(r, 30)));
    await Promise.all([p.execute(() => 1), p.execute(() => 2).catch(() => 0)]);
    process.on('exit', () => console.log('exit-after', Date.now() - started));
  `;
  exitsLongBeforeRenewal(script);
});

test('no engine timer keeps the process alive once the last execution on a JS store settles', () => {
  // The store answers in later turns of the event loop, as a network store does; the
  // engine goes idle in the call that hands it the last release's answer.
  const script = `
    import { ResiliencePipelineBuilder } from 'leasehold';
    const later = (value) => new Promise((r) => setTimeout(() => r(value), 1));
    let token = 0;
    const store = {
      acquire: () => later({ fencingToken: ++token }),
      renew: () => later(true),
      release: () => later(true),
    };
    const p = new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: '1m', store }).build();
    const started = Date.now();
    for (let i = 0; i < 3; i++) await p.execute(async () => i);
    await p.execute(() => new Promise((r) => setTimeout(r, 30)));
    process.on('exit', () => console.log('exit-after', Date.now() - started));
  `;
  exitsLongBeforeRenewal(script);
});

test('a waiting execution keeps the process alive until it settles', () => {
  const script = `
    import { ResiliencePipelineBuilder } from 'leasehold';
    const p = new ResiliencePipelineBuilder().addLock({ key: 'k', wait: '5s' }).build();
    p.execute(() => new Promise((r) => setTimeout(r, 300)));
    p.execute(() => console.log('second ran'));
  `;
  const child = runScript(script);
  assert.match(child.stdout, /second ran/);
});

test('memory stays bounded by live leases, not by keys ever locked', async () => {
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: (c) => c.operationKey, store }).build();
  for (let i = 0; i < 20_000; i++) await pipeline.execute(() => i, { operationKey: `key-${i}` });
  // Leases that lapse without a release are swept too.
  for (let i = 0; i < 20_000; i++) await store.acquire(`lapsing-${i}`, 'o', 5);
  clock.advance(10);
  await store.acquire('last', 'o', 5);
  const host = internals.hostOf(clock);
  assert.equal(host.engine.liveExecutions(), 0);
  // The store keeps at most about twice its live leases, plus a small constant (64).
  assert.ok(host.engine.memEntries(1) <= 2 * store.size + 64, `entries: ${host.engine.memEntries(1)}`);
  assert.equal(store.size, 1);
});

test('stores are held by their users only: dropped pipelines let their stores go', () => {
  const script = `
    import api, { ResiliencePipelineBuilder } from 'leasehold';
    const internals = api[Symbol.for('leasehold.internals')];
    const host = internals.hostOf(undefined);
    const store = () => ({ acquire: async () => ({ fencingToken: 1 }), renew: async () => true, release: async () => true });
    const kept = new ResiliencePipelineBuilder().addLock({ key: 'kept', store: store() }).build();
    for (let i = 0; i < 2000; i++) {
      await new ResiliencePipelineBuilder().addLock({ key: 'k' + i, store: store() }).build().execute(() => i);
    }
    for (let i = 0; i < 5 && host.stores.size > 10; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    console.log('stores', host.stores.size, await kept.execute(() => 'kept works'));
  `;
  const child = runScript(script, { gc: true });
  const [, size, works] = child.stdout.match(/stores (\d+) (.*)/) ?? [];
  assert.ok(Number(size) <= 10, `stores still registered: ${size}`);
  assert.equal(works, 'kept works');
});

test('executions started one inside the other keep no chain of finished contexts alive', () => {
  // Each callback starts the next execution (on a key of its own) and returns without
  // waiting for it: every context is created inside one still running. Only the last
  // context stays reachable.
  const script = `
    import { ResiliencePipelineBuilder } from 'leasehold';
    const collected = { count: 0 };
    const registry = new FinalizationRegistry(() => collected.count++);
    let n = 0;
    let last;
    const pipeline = new ResiliencePipelineBuilder().addLock({ key: () => 'k' + n }).build();
    const all = [];
    const step = async (context) => {
      registry.register(context, 0);
      last = context;
      await null;
      if (++n < 2000) all.push(pipeline.execute(step));
    };
    await pipeline.execute(step);
    while (all.length < 1999) await new Promise((r) => setTimeout(r, 0));
    await Promise.all(all);
    all.length = 0;
    for (let i = 0; i < 5 && collected.count < 1990; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    console.log('collected', collected.count, typeof last);
  `;
  const child = runScript(script, { gc: true });
  const [, count] = child.stdout.match(/collected (\d+) object/) ?? [];
  assert.ok(Number(count) >= 1990, `contexts collected: ${count} of 2000`);
});

test("work a nested execution leaves behind does not keep the enclosing callback's value alive", () => {
  const script = `
    import { ResiliencePipelineBuilder, getLockToken } from 'leasehold';
    const a = new ResiliencePipelineBuilder().addLock({ key: 'a' }).build();
    const b = new ResiliencePipelineBuilder().addLock({ key: 'b' }).build();
    let collected = false;
    const registry = new FinalizationRegistry(() => (collected = true));
    let timer;
    await a.execute(async () => {
      const big = new Array(1000).fill('x');
      registry.register(big, 0);
      await b.execute(() => {
        timer = setInterval(getLockToken, 1e9);
      });
      return big;
    });
    for (let i = 0; i < 5 && !collected; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    console.log('collected', collected);
    clearInterval(timer);
  `;
  const child = runScript(script, { gc: true });
  assert.match(child.stdout, /collected true/);
});

test('a MemoryLockStore nothing uses any more is dropped by the engine: its leases go, its id is reused', () => {
  const script = `
    import api, { MemoryLockStore, FakeTimeProvider, acquireLock } from 'leasehold';
    const internals = api[Symbol.for('leasehold.internals')];
    const clock = new FakeTimeProvider();
    const host = internals.hostOf(clock);
    const idOf = (store) => host.registerStore(store).id;
    const first = [];
    for (let i = 0; i < 2000; i++) {
      const store = new MemoryLockStore({ timeProvider: clock });
      await store.acquire('k', 'o', 60_000); // a lease left behind
      first.push(idOf(store));
    }
    const kept = new MemoryLockStore({ timeProvider: clock });
    const lease = await acquireLock(kept, 'k', '1m');
    for (let i = 0; i < 5; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    const again = [];
    for (let i = 0; i < 2000; i++) again.push(idOf(new MemoryLockStore({ timeProvider: clock })));
    const reused = again.filter((id) => first.includes(id)).length;
    console.log('reused', reused, 'kept', await kept.isLocked('k'), await lease.release(), idOf(kept) === idOf(kept));
  `;
  const child = runScript(script, { gc: true });
  const [, reused, rest] = child.stdout.match(/reused (\d+) (.*)/) ?? [];
  assert.ok(Number(reused) >= 1900, `ids reused: ${reused} of 2000`);
  assert.equal(rest, 'kept true true true', 'a store still used keeps its lease');
});

test('a late grant is released even when nothing else holds its store any more', () => {
  // A store facade whose acquire promise does not refer back to the store; the caller
  // gives up while the acquire is in flight, drops everything, and the grant comes late.
  const script = `
    import { ResiliencePipelineBuilder, FakeTimeProvider } from 'leasehold';
    const tick = () => new Promise((r) => setTimeout(r, 0));
    const released = [];
    const pending = [];
    async function attempt() {
      const store = {
        acquire: (key, owner) => new Promise((resolve) => pending.push({ resolve, owner })),
        renew: () => Promise.resolve(true),
        release: (key, owner) => (released.push(owner), Promise.resolve(true)),
      };
      const pipeline = new ResiliencePipelineBuilder({ timeProvider: new FakeTimeProvider() })
        .addLock({ key: 'k', store })
        .build();
      const controller = new AbortController();
      const run = pipeline.execute(() => 'ran', { signal: controller.signal }).catch((e) => e.message);
      await tick();
      controller.abort(new Error('gave up'));
      return run;
    }
    const outcome = await attempt();
    for (let i = 0; i < 5; i++) { await tick(); globalThis.gc(); }
    const late = pending.shift();
    late.resolve({ fencingToken: 7 });
    for (let i = 0; i < 3; i++) await tick();
    console.log(JSON.stringify({ outcome, released: released.length, owner: released[0] === late.owner }));
  `;
  const child = runScript(script, { gc: true });
  assert.deepEqual(JSON.parse(child.stdout), { outcome: 'gave up', released: 1, owner: true });
});

test('an engine that fails where no caller can be told is retired: its executions reject, later ones too', async () => {
  const clock = new FakeTimeProvider();
  const host = internals.hostOf(clock);
  const store = { acquire: async () => ({ fencingToken: 1 }), renew: async () => true, release: async () => true };
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k', store }).build();
  const holding = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'held' }).build();
  let release;
  const running = holding.execute(() => new Promise((r) => (release = r)));
  // Force a failure inside the engine call that handles a store's answer.
  host.engine.answerAcquire = () => {
    throw new Error('forced engine failure');
  };
  const failed = await pipeline.execute(() => 'never').catch((e) => e);
  assert.equal(failed.code, 'LEASEHOLD_ENGINE_FAILURE');
  assert.equal((await running.catch((e) => e)).code, 'LEASEHOLD_ENGINE_FAILURE', 'the running execution is told');
  release();
  assert.equal((await holding.execute(() => 'x').catch((e) => e)).code, 'LEASEHOLD_ENGINE_FAILURE');
  // Other engines are untouched.
  assert.equal(await new ResiliencePipelineBuilder({ timeProvider: new FakeTimeProvider() }).addLock({ key: 'k' }).build().execute(() => 'fine'), 'fine');
});

test('an engine retired while callbacks hold locks aborts their signals: their leases are no longer renewed', async () => {
  const clock = new FakeTimeProvider();
  const host = internals.hostOf(clock);
  let token = 0;
  const renewed = [];
  const store = {
    acquire: async () => ({ fencingToken: ++token }),
    renew: async (key) => (renewed.push(key), true),
    release: async () => true,
  };
  const lost = [];
  const holding = new ResiliencePipelineBuilder({ timeProvider: clock })
    .addLock({ key: 'outer', store, ttl: 3000, onLockLost: ({ key }) => lost.push(key) })
    .addLock({
      key: 'held',
      store,
      ttl: 3000,
      onLockLost: ({ key }) => {
        lost.push(key);
        throw new Error('a throwing onLockLost is ignored');
      },
    })
    .build();
  let signal;
  let finishWork;
  const running = holding
    .execute((context) => {
      signal = context.signal;
      return new Promise((resolve) => (finishWork = resolve));
    })
    .catch((e) => e);
  const lease = await acquireLock(store, 'manual', 3000, { timeProvider: clock, autoRenew: true });
  // A lease without renewals is not lost: it stands until its ttl, as before.
  const unrenewed = await acquireLock(store, 'unrenewed', 3000, { timeProvider: clock });
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  // Force a failure inside the engine call that handles a store's answer: the engine retires.
  host.engine.answerAcquire = () => {
    throw new Error('forced engine failure');
  };
  const other = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k', store }).build();
  assert.equal((await other.execute(() => 'never').catch((e) => e)).code, 'LEASEHOLD_ENGINE_FAILURE');
  const failure = await running;
  assert.equal(failure.code, 'LEASEHOLD_ENGINE_FAILURE');
  // Nothing renews these leases any more: after ttl anyone may take them, while the
  // callback and the lease holder still run.
  clock.advance(5000);
  assert.deepEqual(renewed, []);
  assert.equal(signal.aborted, true, "the running callback's signal was not aborted");
  assert.equal(lease.signal.aborted, true, "the auto-renewed lease's signal was not aborted");
  for (const reason of [signal.reason, lease.signal.reason]) {
    assert.equal(reason.code, 'LOCK_LOST');
    assert.equal(reason.cause, failure, "the engine's failure is the cause");
  }
  assert.equal(signal.reason.key, 'outer');
  assert.equal(lease.signal.reason.key, 'manual');
  assert.deepEqual(lost, ['outer', 'held'], 'onLockLost of every lock the callback held');
  assert.equal(unrenewed.signal.aborted, false);
  // The retired engine answers nothing more: the leases' release() and extend() answer
  // false at once instead of waiting forever.
  for (const held of [lease, unrenewed]) {
    assert.equal(await held.extend(), false);
    assert.equal(await held.release(), false);
  }
  finishWork();
});

// SPEC 3: getLockToken() is "`undefined` outside any lock". With AsyncLocalStorage the
// context follows every continuation created inside the callback, including a timer or a
// detached promise that runs after the execution released its lock: that code still reads
// the old token as if it held the lock (in a browser, the same code reads undefined).
test('getLockToken() is undefined in a continuation that runs after its execution released the lock', async () => {
  const clock = new FakeTimeProvider();
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k' }).build();
  let fire;
  let later;
  let context;
  const token = await pipeline.execute((ctx) => {
    context = ctx;
    // Detached work, started under the lock, run after it (a timer or an event does the same).
    later = new Promise((resolve) => (fire = resolve)).then(() => getLockToken());
    return getLockToken(ctx);
  });
  assert.equal(typeof token, 'number');
  fire();
  assert.equal(await later, undefined, 'the lock was released before the continuation ran');
  assert.equal(getLockToken(context), undefined, 'the same through the context itself (the browser form)');
});
