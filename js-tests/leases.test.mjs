// SPEC §5–§6: manual leases, inspection, settle, telemetry, withLock. Runs once per engine.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  LockLostError,
  LockStoreError,
  acquireLock,
  withLock,
  getLockToken,
} from './support/leasehold.mjs';
import { advance, deferred, flush } from './support/time.mjs';
import { recordingStore } from './support/stores.mjs';
import { within } from './support/async.mjs';
import api from 'leasehold';

const internals = api[Symbol.for('leasehold.internals')];

describe('acquireLock', () => {
  test('hands out a lease with key, owner and token; undefined while held', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const lease = await acquireLock(store, 'job', '10s');
    assert.equal(lease.key, 'job');
    assert.match(lease.owner, /^([^:]+:[\d.]+:)?[0-9a-f]{32}$/, "host:pid:, then 32 random hex digits");
    assert.equal(typeof lease.fencingToken, 'number');
    assert.equal(await acquireLock(store, 'job', '10s'), undefined);
    assert.equal(await store.isLocked('job'), true);
    assert.equal(await store.ttl('job'), 10_000);
    assert.equal(await lease.release(), true);
    assert.equal(await store.isLocked('job'), false);
    assert.equal(await store.ttl('job'), undefined);
    assert.equal(await lease.release(), false, 'a second release is false');
  });

  test('waits up to `wait`, then resolves undefined', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const first = await acquireLock(store, 'k', '1m');
    const second = acquireLock(store, 'k', '1m', { wait: 500 });
    await advance(clock, 500);
    assert.equal(await second, undefined);
    const third = acquireLock(store, 'k', '1m', { wait: '5s' });
    await advance(clock, 100);
    assert.equal(await first.release(), true);
    const lease = await third;
    assert.ok(lease.fencingToken > first.fencingToken, 'handed over on release');
  });

  test('release() rejects with a LockStoreError when the store fails to release; false after that', async () => {
    const clock = new FakeTimeProvider();
    const down = new Error('store down');
    let failing = 0;
    const store = recordingStore(clock, {
      release: (...args) => {
        if (failing === 1) throw down;
        if (failing === 2) return Promise.reject(down);
        return store.base.release(...args);
      },
    });
    for (failing = 1; failing <= 2; failing++) {
      const key = `k${failing}`;
      const lease = await acquireLock(store, key, 2000, { timeProvider: clock });
      const error = await lease.release().catch((e) => e);
      assert.ok(error instanceof LockStoreError, `${failing}: ${error}`);
      assert.equal(error.key, key);
      assert.equal(error.method, 'release');
      assert.equal(error.cause, down);
      assert.equal(await lease.release(), false, 'a second release() answers false');
      assert.equal(await lease.extend(), false);
    }
    // A release that works still answers true, and one of a lapsed lease false.
    failing = 0;
    const ok = await acquireLock(store, 'ok', 2000, { timeProvider: clock });
    assert.equal(await ok.release(), true);
    const lapsed = await acquireLock(store, 'lapsed', 1000, { timeProvider: clock });
    await advance(clock, 1000, 500);
    assert.equal(await lapsed.release(), false);
    assert.equal(internals.hostOf(clock).execs.size, 0);
  });

  test('a release unanswered when the lease would have ended answers false: the lease is over, not failed', async () => {
    const clock = new FakeTimeProvider();
    let delay = 0;
    const due = []; // [at, answer]: releases answered once fake time reaches `at`
    const store = recordingStore(clock, {
      release: (...args) =>
        new Promise((resolve) => {
          if (delay !== Infinity) due.push([clock.now() + delay, () => resolve(store.base.release(...args))]);
        }),
    });
    for (delay of [20, Infinity]) {
      const lease = await acquireLock(store, `k${delay}`, 2000, { timeProvider: clock });
      await advance(clock, 1990, 10);
      const releasing = lease.release().catch((e) => e);
      for (let t = 0; t < 100; t += 5) {
        await advance(clock, 5);
        for (const [at, answer] of due.splice(0)) (at <= clock.now() ? answer : () => due.push([at, answer]))();
      }
      assert.equal(await releasing, false, `answered after ${delay} ms, past the lease's end`);
    }
    assert.equal(internals.hostOf(clock).execs.size, 0);
  });

  test('release() is false after expiry and after a takeover, and never deletes the new lease', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const lapsed = await acquireLock(store, 'a', 1000);
    clock.advance(1000);
    assert.equal(await lapsed.release(), false);

    const old = await acquireLock(store, 'b', 1000);
    clock.advance(1000);
    const taker = await acquireLock(store, 'b', 1000);
    assert.ok(taker);
    assert.equal(await old.release(), false);
    assert.equal(await store.isLocked('b'), true, "the taker's lease is intact");
    assert.equal(await taker.release(), true);
  });

  test('release() through a JS store uses its answer', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { release: async () => false });
    const lease = await acquireLock(store, 'k', 1000, { timeProvider: clock });
    assert.equal(await lease.release(), false);
  });

  test('extend() pushes the lease out, and is false once it lapsed', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const lease = await acquireLock(store, 'k', 1000);
    clock.advance(900);
    assert.equal(await lease.extend('5s'), true);
    assert.equal(await store.ttl('k'), 5000);
    clock.advance(5000);
    assert.equal(await lease.extend(), false);
    await assert.rejects(lease.extend(0), RangeError);
  });

  test('autoRenew keeps the lease alive, and aborts the signal on loss; extend is false after', async () => {
    const clock = new FakeTimeProvider();
    let refuse = false;
    const store = recordingStore(clock, { renew: (...a) => (refuse ? Promise.resolve(false) : store.base.renew(...a)) });
    const lease = await acquireLock(store, 'k', 3000, { autoRenew: true, timeProvider: clock });
    await advance(clock, 10_000, 500);
    assert.equal(lease.signal.aborted, false);
    assert.ok(store.times('renew').length >= 9);
    refuse = true;
    await advance(clock, 1000, 500);
    assert.equal(lease.signal.aborted, true);
    assert.ok(lease.signal.reason instanceof LockLostError);
    assert.equal(await lease.extend(), false);
    assert.equal(await lease.release(), false);
  });

  // "At most once a minute" jobs take a lease and let it lapse on purpose: once it is over
  // in the store, nothing of it may stay in the host or the engine.
  test('a lease left to lapse, or lost, leaves nothing behind; release() and extend() answer false', async () => {
    const clock = new FakeTimeProvider();
    const host = internals.hostOf(clock);
    const store = new MemoryLockStore({ timeProvider: clock });
    const leases = [];
    for (let i = 0; i < 1000; i++) leases.push(await acquireLock(store, `once-a-minute:${i}`, '1m', { timeProvider: clock }));
    assert.ok(leases.every((lease) => lease !== undefined));
    await advance(clock, 120_000, 10_000);
    assert.equal(store.size, 0, 'every lease lapsed');
    assert.equal(host.engine.liveExecutions(), 0, 'engine executions kept for lapsed leases');
    assert.equal(host.execs.size, 0, 'host records kept for lapsed leases');
    assert.equal(leases[0].signal.aborted, false, 'a lease without renewals lapses, as it said it would: no loss');
    assert.equal(await leases[0].extend(), false);
    assert.equal(await leases[0].release(), false);
    // An auto-renewed lease that is lost (its renewal refused) is wound down the same way.
    const refusing = recordingStore(clock, { renew: async () => false });
    const lost = await acquireLock(refusing, 'k', 3000, { autoRenew: true, timeProvider: clock });
    await advance(clock, 2000, 500);
    assert.equal(lost.signal.aborted, true);
    assert.equal(host.engine.liveExecutions(), 0);
    assert.equal(host.execs.size, 0);
    assert.equal(await lost.release(), false);
    assert.deepEqual(refusing.times('release'), [], 'a lease the store refused to renew is not its to release');
  });

  test('a lease its holder shortens goes to the first waiter at its new end, not the old one', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    const holder = await acquireLock(store, 'k', 1000);
    let waiterGotAt;
    const waiter = acquireLock(store, 'k', 1000, { wait: 5000 }).then((lease) => ((waiterGotAt = clock.now()), lease));
    clock.advance(50);
    assert.equal(await holder.extend(100), true); // the lease now ends at 150
    await advance(clock, 150, 50);
    assert.equal(waiterGotAt, 150);
    assert.ok(await waiter);
    assert.equal(await acquireLock(store, 'k', 1000), undefined, 'the waiter holds it; a newcomer waits its turn');
  });

  test('abort while waiting rejects with the reason', async () => {
    const clock = new FakeTimeProvider();
    const store = new MemoryLockStore({ timeProvider: clock });
    await acquireLock(store, 'k', '1m');
    const controller = new AbortController();
    const waiting = acquireLock(store, 'k', '1m', { wait: '1m', signal: controller.signal });
    controller.abort(new Error('shutting down'));
    await assert.rejects(waiting, /shutting down/);
  });

  test('a store failure rejects with LockStoreError', async () => {
    const clock = new FakeTimeProvider();
    const cause = new Error('down');
    const store = recordingStore(clock, { acquire: async () => Promise.reject(cause) });
    const error = await acquireLock(store, 'k', 1000, { timeProvider: clock }).catch((e) => e);
    assert.ok(error instanceof LockStoreError);
    assert.equal(error.cause, cause);
  });

  test('bad arguments', async () => {
    const store = new MemoryLockStore();
    await assert.rejects(acquireLock({}, 'k', 1000), (e) => e instanceof TypeError && /store/.test(e.message));
    await assert.rejects(acquireLock(store, '', 1000), (e) => e instanceof TypeError && /key/.test(e.message));
    for (const ttl of [0, -1, NaN, Infinity]) {
      await assert.rejects(acquireLock(store, 'k', ttl), (e) => e instanceof RangeError && /ttl/.test(e.message));
    }
    await assert.rejects(acquireLock(store, 'k', 'x'), (e) => e instanceof TypeError && /ttl/.test(e.message));
    await assert.rejects(acquireLock(store, 'k', 1000, { autoRenew: 'yes' }), /autoRenew/);
    await assert.rejects(acquireLock(store, 'k', 1000, { wait: -1 }), RangeError);
    // A memory store's leases run on its own clock; another clock would silently not count.
    const clock = new FakeTimeProvider();
    await assert.rejects(acquireLock(store, 'k', 1000, { timeProvider: clock }), (e) => e instanceof TypeError && /timeProvider/.test(e.message));
    const onClock = new MemoryLockStore({ timeProvider: clock });
    assert.ok(await acquireLock(onClock, 'k', 1000, { timeProvider: clock }));
  });
});

describe('telemetry', () => {
  test('wait → acquire → renew → release, in order, with waited time and token', async () => {
    const clock = new FakeTimeProvider();
    const events = [];
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
      .addLock({ key: 'k', ttl: 3000, wait: '10s', name: 'nightly' })
      .build();
    const holder = deferred();
    const first = pipeline.execute(() => holder.promise);
    const second = pipeline.execute(async () => {
      await advance(clock, 1000);
    });
    await advance(clock, 400);
    holder.resolve();
    await first;
    await second;
    const types = events.map((e) => `${e.type}${e.waitedMs !== undefined ? `@${e.waitedMs}` : ''}`);
    assert.deepEqual(types, ['acquired@0', 'renewed', 'released', 'acquired@400', 'renewed', 'released'].filter((_, i) => i !== 1));
    assert.ok(events.every((e) => e.name === 'nightly' && e.key === 'k'));
    assert.ok(events[2].fencingToken > events[0].fencingToken);
  });

  test('loss: acquired → renewalFailed… → lost; no release of a lost lease; rejected when wait runs out', async () => {
    const clock = new FakeTimeProvider();
    const events = [];
    const store = recordingStore(clock, { renew: async () => Promise.reject(new Error('io')) });
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
      .addLock({ key: 'k', ttl: 3000, store })
      .build();
    await pipeline
      .execute(async () => {
        await advance(clock, 3000, 50);
      })
      .catch(() => {});
    const types = [...new Set(events.map((e) => e.type))];
    assert.deepEqual(types, ['acquired', 'renewalFailed', 'lost']);
    assert.equal(events.find((e) => e.type === 'renewalFailed').error.message, 'io');

    const busy = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
      .addLock({ key: 'held', wait: 100 })
      .build();
    const hold = deferred();
    const holding = busy.execute(() => hold.promise);
    const rejected = busy.execute(() => 1).catch((e) => e);
    await advance(clock, 100);
    assert.ok((await rejected) instanceof LockNotAcquiredError);
    assert.deepEqual(events.filter((e) => e.type === 'rejected').map((e) => e.waitedMs), [100]);
    hold.resolve();
    await holding;
  });

  test('a release that fails is reported', async () => {
    const clock = new FakeTimeProvider();
    const events = [];
    const store = recordingStore(clock, { release: async () => Promise.reject(new Error('gone')) });
    await new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
      .addLock({ key: 'k', store })
      .build()
      .execute(() => 1);
    assert.equal(events.at(-1).type, 'releaseFailed');
    assert.equal(events.at(-1).error.message, 'gone');
  });
});

describe('no logging of its own', () => {
  test('failures reported to telemetry, a throwing telemetry and a throwing onLockLost write nothing to the console', async () => {
    const written = [];
    const methods = ['log', 'info', 'warn', 'error', 'debug', 'trace'];
    const saved = methods.map((m) => console[m]);
    const savedWarning = process.emitWarning;
    for (const m of methods) console[m] = (...args) => written.push([m, ...args]);
    process.emitWarning = (...args) => written.push(['emitWarning', ...args]);
    try {
      const clock = new FakeTimeProvider();
      // A release that fails, and renewals that fail until the lease is lost.
      const failing = recordingStore(clock, {
        renew: async () => Promise.reject(new Error('renew down')),
        release: async () => Promise.reject(new Error('release down')),
      });
      const events = [];
      const lost = await new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e.type) })
        .addLock({ key: 'k', ttl: 3000, store: failing })
        .build()
        .settle(async () => {
          await advance(clock, 3000, 100);
          throw new Error('after loss');
        });
      assert.ok(lost.error instanceof LockLostError);
      const released = await new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e.type) })
        .addLock({ key: 'r', store: failing })
        .build()
        .execute(() => 'v');
      assert.equal(released, 'v');
      assert.ok(events.includes('renewalFailed') && events.includes('lost') && events.includes('releaseFailed'), events.join(' '));
      // A telemetry callback and an onLockLost that throw.
      const refusing = recordingStore(clock, { renew: async () => false });
      const error = await new ResiliencePipelineBuilder({
        timeProvider: clock,
        telemetry: () => {
          throw new Error('telemetry down');
        },
      })
        .addLock({
          key: 't',
          ttl: 3000,
          store: refusing,
          onLockLost: async () => {
            throw new Error('handler down');
          },
        })
        .build()
        .execute(async () => {
          await advance(clock, 1000);
          throw new Error('after loss');
        })
        .catch((e) => e);
      assert.ok(error instanceof LockLostError);
      // A grant that arrives after the try was abandoned.
      const late = deferred();
      const slow = recordingStore(clock, { acquire: () => late.promise });
      const abandoned = new ResiliencePipelineBuilder({ timeProvider: clock })
        .addLock({ key: 'late', ttl: 1000, store: slow })
        .build()
        .execute(() => 'never')
        .catch((e) => e);
      await advance(clock, 1000, 100);
      assert.ok((await abandoned) instanceof LockStoreError);
      late.resolve({ fencingToken: 1 });
      await flush();
    } finally {
      methods.forEach((m, i) => (console[m] = saved[i]));
      process.emitWarning = savedWarning;
    }
    assert.deepEqual(written, []);
  });
});

describe('settle', () => {
  test('every error kind comes back as { ok: false, error }, and a skip-if-held job reads naturally', async () => {
    const clock = new FakeTimeProvider();
    const builder = (lock) => new ResiliencePipelineBuilder({ timeProvider: clock }).addLock(lock).build();
    const hold = deferred();
    const holding = builder({ key: 'cron' }).execute(() => hold.promise);
    const skipped = await builder({ key: 'cron' }).settle(() => 'ran');
    assert.equal(skipped.ok, false);
    assert.ok(skipped.error instanceof LockNotAcquiredError);
    hold.resolve();
    await holding;

    const lost = await builder({ key: 'l', ttl: 3000, store: recordingStore(clock, { renew: async () => false }) }).settle(
      async () => {
        await advance(clock, 1000);
        throw new Error('after loss');
      },
    );
    assert.ok(lost.error instanceof LockLostError);
    const storeFailed = await builder({ key: 's', store: recordingStore(clock, { acquire: async () => Promise.reject(new Error('x')) }) }).settle(() => 1);
    assert.ok(storeFailed.error instanceof LockStoreError);
    const controller = new AbortController();
    controller.abort('stop');
    assert.deepEqual(await builder({ key: 'a' }).settle(() => 1, { signal: controller.signal }), { ok: false, error: 'stop' });
    assert.deepEqual(await builder({ key: 'ok' }).settle(() => 'fine'), { ok: true, value: 'fine' });
  });
});

describe('withLock', () => {
  test('runs a function under one lock', async () => {
    const clock = new FakeTimeProvider();
    const token = await withLock('report', async () => getLockToken(), { timeProvider: clock, ttl: '1m' });
    assert.equal(typeof token, 'number');
    const hold = deferred();
    const holding = withLock('report', () => hold.promise, { timeProvider: clock });
    await assert.rejects(withLock('report', () => 1, { timeProvider: clock, wait: 0 }), LockNotAcquiredError);
    hold.resolve();
    await holding;
    await assert.rejects(withLock('report', () => 1, { ttl: -5 }), RangeError);
  });

  test('waits for a held key by default (unlike addLock), up to the lock ttl', async () => {
    const clock = new FakeTimeProvider();
    const hold = deferred();
    const holding = withLock('report', () => hold.promise, { timeProvider: clock });
    await flush();
    const order = [];
    const waiting = withLock('report', () => order.push('second ran'), { timeProvider: clock });
    await advance(clock, 10_000, 1_000);
    order.push('first released');
    hold.resolve();
    await holding;
    await waiting;
    assert.deepEqual(order, ['first released', 'second ran'], 'the second call waited for the first');

    // The default wait is the lock's own ttl: 1 s here, so the call gives up at 1 s.
    const stuck = deferred();
    const held = withLock('report', () => stuck.promise, { timeProvider: clock });
    await flush();
    let outcome;
    withLock('report', () => 'ran', { timeProvider: clock, ttl: '1s' }).then(
      (value) => (outcome = value),
      (error) => (outcome = error),
    );
    await advance(clock, 999);
    assert.equal(outcome, undefined, 'gave up before its wait (the ttl) ran out');
    await advance(clock, 1);
    assert.ok(outcome instanceof LockNotAcquiredError, `expected LockNotAcquiredError at 1 s, got ${outcome}`);
    stuck.resolve();
    await held;
  });

  test('skipOnLockFailure: a held key resolves undefined at once; the function never runs', async () => {
    const clock = new FakeTimeProvider();
    const hold = deferred();
    const holding = withLock('cleanup', () => hold.promise, { timeProvider: clock });
    await flush();
    let ran = 0;
    assert.equal(await withLock('cleanup', () => ++ran, { timeProvider: clock, skipOnLockFailure: true }), undefined);
    assert.equal(await withLock({ key: 'cleanup', timeProvider: clock, skipOnLockFailure: true }, () => ++ran), undefined);
    assert.equal(ran, 0);
    // With a wait of its own it waits that long first, then skips.
    let outcome = 'pending';
    withLock('cleanup', () => ++ran, { timeProvider: clock, skipOnLockFailure: true, wait: '2s' }).then((v) => (outcome = v));
    await advance(clock, 1_999);
    assert.equal(outcome, 'pending');
    await advance(clock, 1);
    assert.equal(outcome, undefined);
    hold.resolve();
    await holding;
    // A free key runs as usual and resolves the function's value.
    assert.equal(await withLock('cleanup', () => ++ran, { timeProvider: clock, skipOnLockFailure: true }), 1);
  });

  test("skipOnLockFailure skips only its own lock: errors from the function and the store still reject", async () => {
    const clock = new FakeTimeProvider();
    const hold = deferred();
    const holding = withLock('inner', () => hold.promise, { timeProvider: clock });
    await flush();
    // A nested lock that fails inside the function is the function's failure.
    await assert.rejects(
      withLock('outer', () => withLock('inner', () => 1, { timeProvider: clock, wait: 0 }), { timeProvider: clock, skipOnLockFailure: true }),
      LockNotAcquiredError,
    );
    hold.resolve();
    await holding;
    await assert.rejects(withLock('outer', () => Promise.reject(new Error('boom')), { timeProvider: clock, skipOnLockFailure: true }), /boom/);
    const failing = recordingStore(clock, { acquire: () => Promise.reject(new Error('store down')) });
    await assert.rejects(withLock('outer', () => 1, { store: failing, timeProvider: clock, skipOnLockFailure: true }), LockStoreError);
    await assert.rejects(withLock('outer', () => 1, { skipOnLockFailure: 'yes' }), /skipOnLockFailure must be a boolean, got "yes"/);
  });

  test('as a method decorator, every call runs under the lock, with `this` intact', async () => {
    const clock = new FakeTimeProvider();
    const decorate = withLock('nightly-job', { timeProvider: clock, wait: 0 });
    class Job {
      constructor() {
        this.name = 'job';
      }
      async run(x) {
        await flush(1);
        return `${this.name}:${x}:${typeof getLockToken()}`;
      }
    }
    Job.prototype.run = decorate(Job.prototype.run, { kind: 'method', name: 'run' });
    const job = new Job();
    const first = job.run(1);
    await assert.rejects(job.run(2), LockNotAcquiredError);
    assert.equal(await first, 'job:1:number');
    assert.throws(() => decorate(() => {}, { kind: 'field' }), TypeError);

    // With skipOnLockFailure, a call that finds the key held resolves undefined.
    const skipping = withLock('nightly-job', { timeProvider: clock, skipOnLockFailure: true });
    const run = skipping(async function (x) {
      await flush(1);
      return `${this.name}:${x}`;
    }, { kind: 'method', name: 'run' });
    const holder = run.call(job, 1);
    assert.equal(await run.call(job, 2), undefined);
    assert.equal(await holder, 'job:1');
  });

  test("as a method decorator, the options' signal and operationKey are honoured like withLock(key, fn, options)", async () => {
    const clock = new FakeTimeProvider();
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    let ran = 0;
    const viaFn = await withLock('job', () => ++ran, { timeProvider: clock, signal: controller.signal }).catch((e) => e.message);
    assert.equal(viaFn, 'shutting down');
    const decorate = withLock('job', { timeProvider: clock, signal: controller.signal });
    const method = decorate(() => ++ran, { kind: 'method', name: 'run' });
    const viaDecorator = await method().catch((e) => e.message);
    assert.equal(viaDecorator, 'shutting down', 'the decorated method ran although its signal was aborted');
    assert.equal(ran, 0);
    // The `withLock(options)` form too, with the operationKey its key function reads.
    const operationKeys = [];
    const byOperation = withLock({
      key: (context) => (operationKeys.push(context.operationKey), 'job'),
      operationKey: '42',
      timeProvider: clock,
    });
    assert.equal(await byOperation(() => 'done', { kind: 'method', name: 'run' })(), 'done');
    assert.deepEqual(operationKeys, ['42']);
  });
});

describe('extend, more', () => {
  test('two extends in flight are both answered, and release answers pending ones', async () => {
    const clock = new FakeTimeProvider();
    const answer = [];
    const store = recordingStore(clock, { renew: (...a) => new Promise((resolve) => answer.push(() => resolve(store.base.renew(...a)))) });
    const lease = await acquireLock(store, 'k', 3000, { timeProvider: clock });
    const first = lease.extend();
    const second = lease.extend();
    await flush();
    answer.shift()();
    assert.deepEqual(await Promise.all([first, second]), [true, true]);
    const third = lease.extend();
    await flush();
    assert.equal(await lease.release(), true);
    assert.equal(await third, false);
  });

  test('an extend answered "not yours" is false, on a JS store as on the memory store, and so are the ones in flight', async () => {
    const clock = new FakeTimeProvider();
    for (const autoRenew of [false, true]) {
      const answers = [];
      const store = recordingStore(clock, { renew: () => new Promise((resolve) => answers.push(resolve)) });
      const lease = await acquireLock(store, 'k', 3000, { timeProvider: clock, autoRenew });
      const first = lease.extend();
      const second = lease.extend();
      await flush();
      assert.equal(answers.length, 1, 'one renewal answers both');
      answers[0](false);
      // The fake clock stands still: only the answer can settle them.
      assert.deepEqual(await within(2000, 'the extends', Promise.all([first, second])), [false, false]);
      assert.equal(await within(2000, 'another extend', lease.extend()), false);
      assert.equal(await lease.release(), false);
    }
    const memory = new MemoryLockStore({ timeProvider: clock });
    const lapsed = await acquireLock(memory, 'm', 1000, { timeProvider: clock });
    await advance(clock, 1000, 100);
    assert.ok(await acquireLock(memory, 'm', 1000, { timeProvider: clock }), 'taken by another');
    assert.equal(await lapsed.extend(), false);
  });

  test('an extend the store never answers ends when the lease lapses', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { renew: () => new Promise(() => {}) });
    const lease = await acquireLock(store, 'k', 1000, { timeProvider: clock });
    const extending = lease.extend();
    await advance(clock, 1000, 100);
    assert.equal(await extending, false);
  });
});
