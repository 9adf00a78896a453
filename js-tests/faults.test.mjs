// What happens when stores and callbacks misbehave: every fault gives the documented
// error or loss, never a hang past wait/ttl, never a crash. Runs once per engine.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  ResiliencePipelineBuilder,
  FakeTimeProvider,
  LockLostError,
  LockStoreError,
  LockNotAcquiredError,
  MemoryLockStore,
  acquireLock,
  getLockToken,
} from './support/leasehold.mjs';
import { advance, deferred, flush } from './support/time.mjs';
import { recordingStore } from './support/stores.mjs';
import { noUnhandledRejections, within } from './support/async.mjs';

noUnhandledRejections(before, after);

const pipelineOn = (clock, lock, builder = {}) =>
  new ResiliencePipelineBuilder({ timeProvider: clock, ...builder }).addLock(lock).build();

/** Resolves to when (fake time) the promise settled, or 'pending' after `limit` ms of fake time. */
async function settledAt(clock, promise, limit, step = 50) {
  let at;
  const mark = () => (at ??= clock.now());
  promise.then(mark, mark);
  await flush();
  for (let t = 0; t < limit && at === undefined; t += step) await advance(clock, step);
  return at ?? 'pending';
}

describe('stores that misbehave', () => {
  test('renew and release that throw synchronously: renewal retried, release ignored', async () => {
    const clock = new FakeTimeProvider();
    let renewThrows = 2;
    const store = recordingStore(clock, {
      renew: (...a) => {
        if (renewThrows-- > 0) throw new Error('sync renew');
        return store.base.renew(...a);
      },
      release: () => {
        throw new Error('sync release');
      },
    });
    const value = await pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(async ({ signal }) => {
      await advance(clock, 3000, 25);
      return signal.aborted;
    });
    assert.equal(value, false, 'two failed renewals, then one that worked: no loss');
    assert.ok(store.times('renew').length >= 3);
  });

  test('an acquire that fails after the store took the lease: its owner releases it, the key is free at once', async () => {
    const clock = new FakeTimeProvider();
    // The store takes the lease, then the answer is lost (a connection dropped): rejects.
    const store = recordingStore(clock, {
      acquire: async (...args) => {
        await store.base.acquire(...args);
        throw new Error('connection reset');
      },
    });
    const error = await pipelineOn(clock, { key: 'k', store, ttl: '1m' }).execute(() => 'never').catch((e) => e);
    assert.ok(error instanceof LockStoreError, String(error));
    assert.equal(error.method, 'acquire');
    await flush();
    const owners = (method) => store.calls.filter((c) => c.method === method).map((c) => [c.owner, c.at]);
    assert.deepEqual(owners('release'), owners('acquire'), 'released by the same owner, at once');
    assert.equal(store.leases.size, 0, 'the key is free, not held for the minute');
  });

  test('a release that never answers: the execution settles when the lease would have lapsed', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { release: () => new Promise(() => {}) });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 2000 }).execute(() => 'v');
    assert.equal(await settledAt(clock, run, 5000), 2000);
    assert.equal(await run, 'v');
  });

  test('an acquire that never answers: rejects after ttl even with a long wait', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { acquire: () => new Promise(() => {}) });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 1500, wait: '1h' }).execute(() => 'never');
    run.catch(() => {});
    assert.equal(await settledAt(clock, run, 5000), 1500);
    assert.ok((await run.catch((e) => e)) instanceof LockStoreError);
  });

  test('a store that keeps answering "held" is polled until wait, then rejects; never a hang', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { acquire: async () => undefined });
    const run = pipelineOn(clock, { key: 'k', store, wait: 3000 }).execute(() => 'never');
    run.catch(() => {});
    assert.equal(await settledAt(clock, run, 6000, 10), 3000);
    assert.ok((await run.catch((e) => e)) instanceof LockNotAcquiredError);
  });

  test('a thenable that answers twice is heard once', async () => {
    const clock = new FakeTimeProvider();
    let calls = 0;
    const store = recordingStore(clock, {
      acquire: () => ({
        then(ok) {
          calls++;
          ok({ fencingToken: 1 });
          ok({ fencingToken: 2 });
          ok(undefined);
        },
      }),
    });
    const token = await pipelineOn(clock, { key: 'k', store }).execute(({ properties }) => properties.get('leasehold.lockToken'));
    assert.equal(token, 1);
    assert.equal(calls, 1);
  });

  test('answers for the wrong shape, everywhere, are LockStoreErrors or reported renewal failures', async () => {
    const clock = new FakeTimeProvider();
    for (const bad of [null, 'ok', 1, {}, [], { fencingToken: '1' }, { fencingToken: 2 ** 60 }, { fencingToken: NaN }]) {
      const store = recordingStore(clock, { acquire: async () => bad });
      const result = await pipelineOn(clock, { key: 'k', store }).execute(() => 'ran').catch((e) => e);
      // null, like undefined, means "held".
      if (bad === null) assert.ok(result instanceof LockNotAcquiredError);
      else assert.ok(result instanceof LockStoreError, `${JSON.stringify(bad)} → ${result}`);
    }
  });

  test('an answer whose fencingToken cannot be read (a throwing getter, a revoked proxy) is the store failing, at once', async () => {
    const clock = new FakeTimeProvider();
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const boom = new Error('boom');
    const answers = [{ get fencingToken() { throw boom; } }, new Proxy({}, { get() { throw boom; } }), proxy];
    for (const answer of answers) {
      const store = recordingStore(clock, { acquire: async () => answer });
      let ran = false;
      // The fake clock stands still: only the answer itself can settle these.
      const run = pipelineOn(clock, { key: 'k', store, ttl: 60_000 }).execute(() => (ran = true));
      const viaPipeline = await within(2000, 'the rejection', run.catch((e) => e));
      assert.ok(viaPipeline instanceof LockStoreError, String(viaPipeline));
      assert.equal(viaPipeline.method, 'acquire');
      assert.ok(viaPipeline.cause === boom || viaPipeline.cause instanceof TypeError, String(viaPipeline.cause));
      assert.equal(ran, false);
      const lease = acquireLock(store, 'k', 60_000, { timeProvider: clock });
      const viaHandle = await within(2000, "the handle's rejection", lease.catch((e) => e));
      assert.ok(viaHandle instanceof LockStoreError, String(viaHandle));
    }
  });

  test('a store whose tokens go back (5 then 3, 7 then 7): LockStoreError, the callback never runs, the lease is released', async () => {
    /** A store that grants every acquire, with the next of `tokens`; records its releases. */
    const goingBack = (tokens) => {
      const calls = { acquired: [], released: [] };
      const store = {
        calls,
        async acquire(key, owner) {
          calls.acquired.push(owner);
          return { fencingToken: tokens.shift() };
        },
        renew: async () => true,
        async release(key, owner) {
          calls.released.push(owner);
          return true;
        },
      };
      return store;
    };
    const rejection = (promise) => promise.then((value) => assert.fail(`resolved with ${value}`), (error) => error);
    const checkFailure = (error, first, second) => {
      assert.ok(error instanceof LockStoreError, String(error));
      assert.equal(error.method, 'acquire');
      assert.equal(error.key, 'acct:1');
      assert.match(error.message, new RegExp(`fencing token ${second} is not larger than ${first}, the last one this process saw`));
    };

    // Pipelines, one execution after the other.
    const store = goingBack([5, 3]);
    const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'acct:1', store }).build();
    assert.equal(await pipeline.execute(() => getLockToken()), 5);
    let ran = false;
    checkFailure(await rejection(pipeline.execute(() => (ran = true))), 5, 3);
    assert.equal(ran, false, 'the callback never runs');
    assert.deepEqual(store.calls.released, store.calls.acquired, 'both leases released, the second by its owner');

    // Manual leases: the second is refused while the first is still held.
    const manual = goingBack([7, 7]);
    const first = await acquireLock(manual, 'acct:1', '10s');
    assert.equal(first.fencingToken, 7);
    checkFailure(await rejection(acquireLock(manual, 'acct:1', '10s')), 7, 7);
    assert.deepEqual(manual.calls.released, [manual.calls.acquired[1]], 'the lease answered with token 7 again is released');
    assert.equal(await first.release(), true);
  });

  test('a renewal answer that arrives after the loss changes nothing', async () => {
    const clock = new FakeTimeProvider();
    const late = deferred();
    const store = recordingStore(clock, { renew: () => late.promise });
    const lost = [];
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000, onLockLost: ({ key }) => lost.push(key) }).execute(
      async ({ signal }) => {
        await advance(clock, 3000, 100);
        late.resolve(true);
        await flush();
        return [signal.aborted, signal.reason instanceof LockLostError];
      },
    );
    assert.deepEqual(await run, [true, true]);
    assert.deepEqual(lost, ['k'], 'onLockLost called once');
  });

  test('onLockLost that throws or rejects does not break anything', async () => {
    const clock = new FakeTimeProvider();
    for (const onLockLost of [
      () => {
        throw new Error('sync');
      },
      async () => {
        throw new Error('async');
      },
    ]) {
      const store = recordingStore(clock, { renew: async () => false });
      const error = await pipelineOn(clock, { key: 'k', store, ttl: 3000, onLockLost })
        .execute(async () => {
          await advance(clock, 1000);
          throw new Error('failed after loss');
        })
        .catch((e) => e);
      assert.ok(error instanceof LockLostError);
    }
  });
});

describe('callbacks that misbehave', () => {
  test('a callback that never settles: the lease keeps renewing, and the caller can still abort it', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const controller = new AbortController();
    let signal;
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(
      (context) => {
        signal = context.signal;
        return new Promise(() => {});
      },
      { signal: controller.signal },
    );
    await advance(clock, 30_000, 500);
    assert.equal(store.times('renew').length, 30, 'renewed every second for 30 s');
    assert.equal(signal.aborted, false);
    controller.abort('enough');
    assert.equal(signal.aborted, true);
    assert.equal(signal.reason, 'enough');
    void run;
  });

  test('a callback that returns a thenable, or throws a non-Error', async () => {
    const clock = new FakeTimeProvider();
    const p = pipelineOn(clock, { key: 'k' });
    assert.equal(await p.execute(() => ({ then: (ok) => ok('from thenable') })), 'from thenable');
    await assert.rejects(
      p.execute(() => {
        throw 'a string';
      }),
      (e) => e === 'a string',
    );
    await assert.rejects(p.execute(() => Promise.reject(undefined)), (e) => e === undefined);
    assert.equal(await p.execute(() => 'free again'), 'free again');
  });

  test('a callback that ignores its signal after a loss: its value is returned, and a newer holder gets a larger token', async () => {
    const clock = new FakeTimeProvider();
    const memory = new MemoryLockStore({ timeProvider: clock });
    let cut = false;
    const store = {
      acquire: (...a) => memory.acquire(...a),
      renew: (...a) => (cut ? Promise.reject(new Error('partition')) : memory.renew(...a)),
      release: (...a) => memory.release(...a),
    };
    const pipeline = pipelineOn(clock, { key: 'k', store, ttl: 3000, wait: '10s' });
    const tokens = [];
    const stale = pipeline.execute(async ({ properties }) => {
      tokens.push(properties.get('leasehold.lockToken'));
      cut = true;
      await advance(clock, 3100, 100);
      return 'stale value';
    });
    const fresh = pipeline.execute(({ properties }) => tokens.push(properties.get('leasehold.lockToken')));
    assert.equal(await stale, 'stale value');
    await advance(clock, 2000, 100);
    await fresh;
    assert.ok(tokens[1] > tokens[0], `${tokens}`);
  });
});

describe('races and odd values', () => {
  test('a caller that aborts between the grant and the run: the callback never runs', async () => {
    const clock = new FakeTimeProvider();
    const controller = new AbortController();
    // Telemetry sees the grant before the host runs the callback: abort right there.
    const pipeline = pipelineOn(clock, { key: 'k', wait: '1m' }, {
      telemetry: (e) => e.type === 'acquired' && e.operationKey === 'waiter' && controller.abort('changed my mind'),
    });
    const hold = deferred();
    const holder = pipeline.execute(() => hold.promise, { operationKey: 'holder' });
    let ran = false;
    const waiter = pipeline.execute(() => (ran = true), { operationKey: 'waiter', signal: controller.signal }).catch((e) => e);
    hold.resolve();
    await holder;
    assert.equal(await waiter, 'changed my mind');
    assert.equal(ran, false);
    assert.equal(await pipeline.execute(() => 'free'), 'free', 'and the lock was released');
  });

  test('the store error of an inner lock keeps its cause when an outer lock is on a JS store', async () => {
    const clock = new FakeTimeProvider();
    const cause = new Error('inner store down');
    const outer = recordingStore(clock);
    const inner = recordingStore(clock, { acquire: async () => Promise.reject(cause) });
    const error = await new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'outer', store: outer })
      .addLock({ key: 'inner', store: inner })
      .build()
      .execute(() => 'never')
      .catch((e) => e);
    assert.ok(error instanceof LockStoreError);
    assert.equal(error.key, 'inner');
    assert.equal(error.cause, cause);
    assert.equal(outer.times('release').length, 1, 'the outer lock was released');
  });

  test('a callback result whose then getter throws: rejects with that error, lock released', async () => {
    const clock = new FakeTimeProvider();
    const p = pipelineOn(clock, { key: 'k' });
    const boom = new Error('then getter');
    const error = await p
      .execute(() => ({
        get then() {
          throw boom;
        },
      }))
      .catch((e) => e);
    assert.equal(error, boom);
    assert.equal(await p.execute(() => 'free'), 'free');
  });

  test('a key function may read the context, signal included', async () => {
    const clock = new FakeTimeProvider();
    const p = pipelineOn(clock, { key: (ctx) => `k:${ctx.signal.aborted}:${ctx.operationKey}` });
    assert.equal(await p.execute((ctx) => ctx.operationKey, { operationKey: 'x' }), 'x');
  });
});

describe('stores that break the host’s assumptions', () => {
  test('executions started inside one another synchronously, thousands deep, all run; the engine keeps working', async () => {
    // Deep enough to exhaust the JS stack if each started on the stack of the one before
    // (on wasm, running out of stack inside an engine call left the engine unusable).
    const clock = new FakeTimeProvider();
    const depth = 5000;
    const started = [];
    let asked = 0;
    const allStarted = deferred();
    const store = recordingStore(clock, {
      acquire: (key, owner, ttl) => {
        if (asked < depth) {
          asked += 1;
          started.push(pipeline.execute(() => 'ran', { operationKey: `s${asked}` }));
          if (started.length === depth) allStarted.resolve();
        }
        return store.base.acquire(key, owner, ttl);
      },
    });
    const pipeline = pipelineOn(clock, { key: ({ operationKey }) => operationKey, store });
    assert.equal(await pipeline.execute(() => 'first', { operationKey: 'first' }), 'first');
    await within(10_000, 'every nested execution to start', allStarted.promise);
    const results = await within(10_000, 'the nested executions', Promise.allSettled(started));
    assert.equal(results.length, depth);
    assert.deepEqual(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason)).slice(0, 3), []);
    const callbacks = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: ({ operationKey }) => operationKey }).build();
    const nest = (i) => callbacks.execute(() => (i < depth ? nest(i + 1) : 'deepest'), { operationKey: `c${i}` });
    assert.equal(await within(10_000, 'callbacks nested 5,000 deep', nest(0)), 'deepest');
    assert.equal(await pipelineOn(clock, { key: 'after' }).execute(() => 'still fine'), 'still fine');
  });

  test('a store whose promise has a broken then: LockStoreError, and the engine keeps working', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, {
      acquire: () => {
        const p = Promise.resolve({ fencingToken: 1 });
        p.then = 5;
        return p;
      },
    });
    const error = await pipelineOn(clock, { key: 'k', store }).execute(() => 'never').catch((e) => e);
    assert.ok(error instanceof LockStoreError, String(error));
    assert.equal(await pipelineOn(clock, { key: 'other' }).execute(() => 'still fine'), 'still fine');
  });

  test('extend() with a renew that throws synchronously answers false, and the next extend answers too', async () => {
    const clock = new FakeTimeProvider();
    let throwing = true;
    const store = recordingStore(clock, {
      renew: (...a) => {
        if (throwing) throw new Error('sync renew');
        return store.base.renew(...a);
      },
    });
    const lease = await acquireLock(store, 'k', 3000, { timeProvider: clock });
    assert.equal(await lease.extend(), false);
    throwing = false;
    assert.equal(await lease.extend(), true);
    assert.equal(await lease.release(), true);
  });
});

// Every store call misbehaving in every way, combined with the caller aborting and the
// callback failing or outliving its lease, and with an outer lock: each execution
// settles once, as documented, in bounded fake time, never runs its callback without
// the lease or twice, and leaves no lease, record or request behind.
describe('every store fault, at every step', () => {
  const TTL = 3000;
  const WAIT = 2000;
  /** Answers `base`'s result once fake time has passed `ms` from the call. */
  const lateBy = (ms) => (base, clock) => (...a) => {
    const until = clock.now() + ms;
    const answer = deferred();
    (async () => {
      while (clock.now() < until) await flush(1);
      answer.resolve(base(...a));
    })();
    return answer.promise;
  };
  const FAULTS = {
    throwSync: () => () => {
      throw new Error('sync');
    },
    reject: () => () => Promise.reject(new Error('async')),
    never: (base) => (...a) => (base(...a), new Promise(() => {})),
    twice: (base) => (...a) => ({
      then(ok, ko) {
        base(...a).then((v) => (ok(v), ok(v), ko(new Error('again'))));
      },
    }),
    wrongShape: (base) => async (...a) => (await base(...a), { weird: true }),
    afterWait: lateBy(WAIT + 10),
    afterTtl: lateBy(TTL + 10),
  };
  // What an acquire fault does when the execution is not aborted first.
  const ACQUIRE_FAILS = { throwSync: 'sync', reject: 'async', never: 'timeout', wrongShape: 'shape', afterTtl: 'timeout' };

  const cases = [];
  for (const method of ['acquire', 'renew', 'release'])
    for (const fault of Object.keys(FAULTS))
      for (const abort of ['none', 'acquiring', 'running'])
        for (const callback of ['value', 'throw', 'outlives'])
          for (const nested of [false, true]) cases.push({ method, fault, abort, callback, nested });

  test(`${cases.length} combinations on a custom JS store`, async () => {
    const { hostOf } = (await import('leasehold')).default[Symbol.for('leasehold.internals')];
    for (const c of cases) {
      const name = JSON.stringify(c);
      const clock = new FakeTimeProvider();
      const host = hostOf(clock);
      const overrides = {};
      const store = recordingStore(clock, overrides);
      overrides[c.method] = FAULTS[c.fault]((...a) => store.base[c.method](...a), clock);
      const outer = recordingStore(clock);
      const controller = new AbortController();
      const lost = [];
      let builder = new ResiliencePipelineBuilder({ timeProvider: clock });
      if (c.nested) builder = builder.addLock({ key: 'outer', store: outer, ttl: TTL, wait: WAIT });
      builder = builder.addLock({ key: 'k', store, ttl: TTL, wait: WAIT, onLockLost: ({ key }) => lost.push(key) });
      let runs = 0;
      let withLease = true;
      let reason;
      const run = builder.build().execute(
        async ({ signal }) => {
          runs++;
          const lease = store.leases.get('k');
          withLease &&= lease !== undefined && lease.expires > clock.now();
          if (c.abort === 'running') controller.abort('bye');
          if (c.callback === 'throw') throw new Error('callback');
          if (c.callback === 'outlives') await advance(clock, 2 * TTL, 100);
          reason = signal.reason;
          return 'value';
        },
        { signal: controller.signal },
      );
      let settled = 0;
      let outcome;
      run.then(
        (value) => ((settled += 1), (outcome = { value })),
        (error) => ((settled += 1), (outcome = { error })),
      );
      if (c.abort === 'acquiring') controller.abort('bye');
      await flush();
      // Bounded: a try by its ttl, a renewal by the lease's expiry, a release by then.
      for (let t = 0; t < 3 * TTL && !settled; t += 50) await advance(clock, 50);
      assert.equal(settled, 1, `${name}: settles within 3 ttl`);
      await advance(clock, 2 * TTL, 250); // late answers arrive, and are dealt with

      const acquireFails = c.method === 'acquire' ? ACQUIRE_FAILS[c.fault] : undefined;
      // A store that throws from the call itself fails before the caller can abort.
      const abortedFirst = c.abort === 'acquiring' && !(acquireFails === 'sync' && !c.nested);
      const { value, error } = outcome;
      if (abortedFirst) {
        assert.equal(error, 'bye', `${name}: rejects with the abort reason`);
      } else if (acquireFails) {
        assert.ok(error instanceof LockStoreError, `${name}: ${error}`);
        assert.equal(error.key, 'k');
        assert.equal(error.method, 'acquire');
        if (acquireFails === 'sync' || acquireFails === 'async') assert.equal(error.cause?.message, acquireFails);
        if (acquireFails === 'shape') assert.match(error.message, /fencingToken/);
        if (acquireFails === 'timeout') assert.match(error.message, /within 3000 ms/);
      } else if (c.callback === 'throw') {
        assert.equal(error?.message, 'callback', `${name}: rejects with the callback's error`);
      } else {
        assert.equal(value, 'value', `${name}: ${error}`);
      }
      assert.equal(runs, abortedFirst || acquireFails ? 0 : 1, `${name}: runs`);
      assert.ok(withLease, `${name}: the callback ran under a live lease`);
      // A callback that outlives its lease learns of the loss unless the caller aborted first.
      const renewFails = c.method === 'renew' && c.fault !== 'twice';
      if (runs && c.callback === 'outlives') {
        if (c.abort === 'running') assert.equal(reason, 'bye', name);
        else if (renewFails) assert.ok(reason instanceof LockLostError, `${name}: ${reason}`);
        else assert.equal(reason, undefined, name);
        assert.deepEqual(lost, renewFails ? ['k'] : [], `${name}: onLockLost`);
      }
      // Released once when the store answered with a lease (late, or after the caller
      // gave up, too); an answer that is no lease (a failure, a wrong shape) is not one,
      // but the store may have taken the lease anyway: released once too.
      const answeredLease = store.times('acquire').length > 0 && !['sync', 'async', 'shape'].includes(acquireFails) && !(c.method === 'acquire' && c.fault === 'never');
      const orphan = store.times('acquire').length > 0 && ['sync', 'async', 'shape'].includes(acquireFails);
      assert.equal(store.times('release').length, answeredLease || orphan ? 1 : 0, `${name}: releases`);
      for (const s of [store, outer]) {
        assert.deepEqual([...s.leases.values()].filter((l) => l.expires > clock.now()), [], `${name}: no live lease`);
      }
      assert.equal(host.execs.size, 0, `${name}: host records`);
      assert.equal(host.engine.liveExecutions(), 0, `${name}: engine executions`);
      // Kept, within a bound, while nobody waits for them: an acquire never answered (a
      // grant it brings is released), and the release of a late grant that never answers.
      const lateRelease = c.method === 'release' && abortedFirst && answeredLease;
      const kept = c.fault === 'never' && ((c.method === 'acquire' && store.times('acquire').length > 0) || lateRelease) ? 1 : 0;
      assert.equal(host.engine.openRequests(), kept, `${name}: open requests`);
    }
  });
});
