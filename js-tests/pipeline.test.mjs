// SPEC §1–§3 through the public API, on FakeTimeProvider. Runs once per engine.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  engine,
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  LockLostError,
  LockStoreError,
  isRejection,
  getLockToken,
  LOCK_TOKEN,
  acquireLock,
} from './support/leasehold.mjs';
import { flush, advance, deferred } from './support/time.mjs';
import { recordingStore } from './support/stores.mjs';

const pipelineOn = (clock, lock, builder = {}) =>
  new ResiliencePipelineBuilder({ timeProvider: clock, ...builder }).addLock(lock).build();

test('the engine in use is the one asked for', () => {
  assert.equal(engine, process.env.LEASEHOLD_ENGINE || 'native');
});

describe('run', () => {
  test('the callback gets its fencing token in properties and from getLockToken, across await', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'acct:1' });
    assert.equal(getLockToken(), undefined, 'undefined outside any lock');
    const seen = await pipeline.execute(async (context) => {
      const before = getLockToken();
      await flush(1);
      const deep = await Promise.resolve().then(() => getLockToken());
      return { before, deep, explicit: getLockToken(context), property: context.properties.get(LOCK_TOKEN) };
    });
    assert.equal(typeof seen.before, 'number');
    assert.deepEqual(seen, { before: seen.before, deep: seen.before, explicit: seen.before, property: seen.before });
    assert.equal(getLockToken(), undefined);
  });

  test('a synchronous callback and a non-promise value work', async () => {
    const pipeline = pipelineOn(new FakeTimeProvider(), { key: 'k' });
    assert.equal(await pipeline.execute(() => 42), 42);
    await assert.rejects(
      pipeline.execute(() => {
        throw new SyntaxError('boom');
      }),
      SyntaxError,
    );
  });

  test('the key defaults to the operationKey, and a key function sees the context', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    await pipelineOn(clock, { store }).execute(() => 1, { operationKey: 'op-7' });
    await pipelineOn(clock, { store, key: (ctx) => `order:${ctx.operationKey}` }).execute(() => 1, { operationKey: 'x' });
    assert.deepEqual(
      store.calls.filter((c) => c.method === 'acquire').map((c) => c.key),
      ['op-7', 'order:x'],
    );
  });

  test('fail fast: a held key rejects with LockNotAcquiredError and the callback never runs', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'nightly' });
    const holding = deferred();
    const first = pipeline.execute(() => holding.promise);
    let ran = false;
    const error = await pipeline
      .execute(() => {
        ran = true;
      })
      .catch((e) => e);
    assert.equal(ran, false);
    assert.ok(error instanceof LockNotAcquiredError);
    assert.ok(error instanceof Error);
    assert.equal(error.code, 'LOCK_NOT_ACQUIRED');
    assert.equal(error.key, 'nightly');
    assert.equal(error.httpStatus, 409);
    assert.equal(isRejection(error), true);
    assert.equal(isRejection(new Error('x')), false);
    holding.resolve('done');
    assert.equal(await first, 'done');
    // Right after an execution settles, a fail-fast call finds the key free.
    assert.equal(await pipeline.execute(() => 'free'), 'free');
  });

  test('locks are not reentrant: a nested lock on a held key waits and fails at its wait', async () => {
    const clock = new FakeTimeProvider();
    const outer = pipelineOn(clock, { key: 'k' });
    const inner = pipelineOn(clock, { key: 'k', wait: 500 });
    const result = outer.execute(async () => {
      const nested = inner.execute(() => 'inner ran').catch((e) => e);
      await advance(clock, 500, 100);
      return nested;
    });
    const error = await result;
    assert.ok(error instanceof LockNotAcquiredError);
  });
});

describe('waiting', () => {
  test('a JS store is polled at 50 ms doubling to 1 s, with a last try at the deadline', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { acquire: async () => undefined });
    // A wait long enough that the 1 s cap shows: after 800 ms comes 1000, not 1600.
    const result = pipelineOn(clock, { key: 'k', store, wait: 5000 })
      .execute(() => 'ran')
      .catch((e) => e);
    await advance(clock, 5500, 10);
    const error = await result;
    assert.ok(error instanceof LockNotAcquiredError);
    assert.deepEqual(store.times('acquire'), [0, 50, 150, 350, 750, 1550, 2550, 3550, 4550, 5000]);
  });

  test('durations are strings too: wait "1s" ends at 1000 ms', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { acquire: async () => undefined });
    const result = pipelineOn(clock, { key: 'k', store, wait: '1s' }).execute(() => 1).catch((e) => e);
    await advance(clock, 1200, 10);
    assert.ok((await result) instanceof LockNotAcquiredError);
    assert.equal(store.times('acquire').at(-1), 1000);
  });

  test('the memory store wakes a waiter at the release, not at a poll', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'k', wait: '10s' });
    const holding = deferred();
    const first = pipeline.execute(() => holding.promise);
    const order = [];
    const second = pipeline.execute(() => order.push(['second', clock.now()]));
    await advance(clock, 7);
    assert.deepEqual(order, []);
    holding.resolve();
    await first;
    await second;
    assert.deepEqual(order, [['second', 7]]);
  });

  test('waiters are woken in arrival order', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'fifo', wait: '1m' });
    const order = [];
    const runs = [];
    for (let i = 0; i < 25; i++) {
      runs.push(
        pipeline.execute(async () => {
          order.push(i);
          await flush(1);
        }),
      );
    }
    await Promise.all(runs);
    assert.deepEqual(order, [...Array(25).keys()]);
  });

  test('a handed-over lock settles the previous holder first, sync or async, value or throw', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'handover', wait: '1m' });
    const settled = [];
    const ran = [];
    const callbacks = [
      async () => {
        ran.push(0);
        await flush(1);
        return 0;
      },
      () => (ran.push(1), 1),
      async () => {
        ran.push(2);
        await flush(1);
        throw new Error('two');
      },
      () => {
        ran.push(3);
        throw new Error('three');
      },
      async () => (ran.push(4), getLockToken()),
    ];
    const runs = callbacks.map((cb, i) =>
      pipeline.execute(cb).then(
        (value) => settled.push([i, 'value', value]),
        (error) => settled.push([i, 'error', error.message]),
      ),
    );
    await Promise.all(runs);
    assert.deepEqual(ran, [0, 1, 2, 3, 4]);
    assert.deepEqual(settled.map(([i]) => i), [0, 1, 2, 3, 4]);
    assert.deepEqual(settled.slice(0, 4), [
      [0, 'value', 0],
      [1, 'value', 1],
      [2, 'error', 'two'],
      [3, 'error', 'three'],
    ]);
    assert.equal(typeof settled[4][2], 'number');
  });

  for (const telemetry of [false, true]) {
    test(`synchronous callbacks handed the lock in a row settle in order${telemetry ? ', with telemetry' : ''}`, async () => {
      const clock = new FakeTimeProvider();
      const events = [];
      const builder = telemetry ? { telemetry: (e) => events.push(e.type) } : {};
      const pipeline = pipelineOn(clock, { key: 'sync-row', wait: '1m' }, builder);
      const settled = [];
      const callbacks = [
        async () => {
          await flush(1);
          return 0;
        },
        () => 1,
        () => 2,
        () => 3,
      ];
      await Promise.all(callbacks.map((cb, i) => pipeline.execute(cb).then((value) => settled.push(value))));
      assert.deepEqual(settled, [0, 1, 2, 3]);
      if (telemetry) assert.equal(events.filter((t) => t === 'released').length, 4, events.join(' '));
    });
  }

  test('a callback whose returned promise throws from `then` fails, and its lock is released', async () => {
    class BadPromise extends Promise {
      then() {
        throw new Error('bad then');
      }
    }
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'bad-then', wait: '1m' });
    const first = pipeline.execute(async () => {
      await flush(1);
      return 'first';
    });
    const handedOver = pipeline.execute(() => BadPromise.resolve(1));
    assert.equal(await first, 'first');
    await assert.rejects(handedOver, { message: 'bad then' });
    const alone = await pipelineOn(clock, { key: 'bad-then', wait: 0 }).execute(() => 'free again');
    assert.equal(alone, 'free again');
  });

  test('tokens increase for every grant of a key', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'k', wait: '1m' });
    const tokens = await Promise.all(Array.from({ length: 10 }, () => pipeline.execute(() => getLockToken())));
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${tokens}`);
  });
});

describe('renewal and loss', () => {
  test('renews every ttl/3 while the callback runs', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const done = deferred();
    const run = pipelineOn(clock, { key: 'k', store, ttl: '3s' }).execute(() => done.promise);
    await advance(clock, 4500, 100);
    done.resolve();
    await run;
    assert.deepEqual(store.times('renew'), [1000, 2000, 3000, 4000]);
    assert.deepEqual(store.times('release'), [4500]);
  });

  test('the default ttl is 30 s, renewed every 10 s', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const done = deferred();
    const run = pipelineOn(clock, { key: 'k', store }).execute(() => done.promise);
    await advance(clock, 25_000, 1000);
    done.resolve();
    await run;
    assert.deepEqual(
      store.calls.map((c) => [c.method, c.at, c.ttl]),
      [
        ['acquire', 0, 30_000],
        ['renew', 10_000, 30_000],
        ['renew', 20_000, 30_000],
        ['release', 25_000, undefined],
      ],
    );
  });

  test('renew answering false is a loss at once: signal aborted with LockLostError, onLockLost called', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { renew: async () => false });
    const lost = [];
    const pipeline = pipelineOn(clock, { key: 'acct', store, ttl: 3000, onLockLost: (args) => lost.push(args) });
    let signal;
    let callbackContext;
    const run = pipeline.execute(
      async (context) => {
        callbackContext = context;
        signal = context.signal;
        await advance(clock, 1000);
        assert.equal(signal.aborted, true);
        throw new Error('write failed');
      },
      { operationKey: 'op-lost' },
    );
    const error = await run.catch((e) => e);
    assert.ok(error instanceof LockLostError);
    assert.ok(error instanceof Error, 'LockLostError is an Error');
    assert.equal(error.name, 'LockLostError');
    assert.equal(error.code, 'LOCK_LOST');
    assert.equal(error.key, 'acct');
    assert.equal(error.cause.message, 'write failed');
    assert.ok(signal.reason instanceof LockLostError);
    assert.equal(lost.length, 1);
    assert.equal(lost[0].key, 'acct');
    // onLockLost gets the execution's own context: its operationKey and its signal.
    assert.equal(lost[0].context, callbackContext);
    assert.equal(lost[0].context.operationKey, 'op-lost');
    assert.equal(lost[0].context.signal, signal);
    assert.equal(clock.now(), 1000);
  });

  test('a failing renewal is retried while the lease is valid, and the lease is lost at expiry', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, {
      renew: async () => {
        throw new Error('connection reset');
      },
    });
    let signal;
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(async (context) => {
      signal = context.signal;
      await advance(clock, 2999, 10);
      assert.equal(signal.aborted, false, 'still valid at 2999');
      await advance(clock, 1);
      assert.equal(signal.aborted, true, 'lost at 3000');
      return 'ignored the loss';
    });
    // A callback that succeeds anyway returns its value.
    assert.equal(await run, 'ignored the loss');
    assert.deepEqual(store.times('renew'), [1000, 1050, 1150, 1350, 1750, 2550]);
  });

  test('a renewal that recovers keeps the lease', async () => {
    const clock = new FakeTimeProvider();
    let failures = 2;
    const store = recordingStore(clock, {
      renew: (...args) => (failures-- > 0 ? Promise.reject(new Error('blip')) : store.base.renew(...args)),
    });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(async (context) => {
      await advance(clock, 10_000, 50);
      return context.signal.aborted;
    });
    assert.equal(await run, false);
  });

  test('a renewal the store never answers is a loss at the lease expiry', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, { renew: () => new Promise(() => {}) });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(async (context) => {
      await advance(clock, 2999, 100);
      const before = context.signal.aborted;
      await advance(clock, 1);
      return [before, context.signal.aborted];
    });
    assert.deepEqual(await run, [false, true]);
  });

  test('the holder deadline counts from when the request was sent, not when it was answered', async () => {
    const clock = new FakeTimeProvider();
    // acquire takes 900 ms to answer; the lease still counts from 0.
    const slow = deferred();
    const store = recordingStore(clock, { acquire: (...a) => slow.promise.then(() => store.base.acquire(...a)), renew: () => new Promise(() => {}) });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(async (context) => {
      await advance(clock, 2099, 100); // now 2999
      const before = context.signal.aborted;
      await advance(clock, 1);
      return [before, context.signal.aborted, clock.now()];
    });
    await advance(clock, 900);
    slow.resolve();
    assert.deepEqual(await run, [false, true, 3000]);
  });

  test('after a slow renewal, the deadline counts from when the renewal was sent, not when it was answered', async () => {
    const clock = new FakeTimeProvider();
    // The first renewal (sent at 1000) is answered at 1900; later ones are never answered.
    const first = deferred();
    let renewals = 0;
    const store = recordingStore(clock, {
      renew: (...a) => (++renewals === 1 ? first.promise.then(() => store.base.renew(...a)) : new Promise(() => {})),
    });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 }).execute(async (context) => {
      await advance(clock, 1900, 100); // the renewal went out at 1000; now 1900
      first.resolve();
      await advance(clock, 2099, 100); // 3999: the lease renewed at 1000 runs to 4000
      const before = context.signal.aborted;
      await advance(clock, 1);
      return [before, context.signal.aborted, clock.now()];
    });
    assert.deepEqual(await run, [false, true, 4000]);
    assert.equal(store.times('renew')[0], 1000);
  });
});

describe('release', () => {
  test('releases once, as the owner, after success and after failure; settles after the release', async () => {
    for (const fails of [false, true]) {
      const clock = new FakeTimeProvider();
      const release = deferred();
      const store = recordingStore(clock, { release: (...a) => release.promise.then(() => store.base.release(...a)) });
      let settled = false;
      const run = pipelineOn(clock, { key: 'k', store })
        .execute(async () => {
          if (fails) throw new Error('callback failed');
          return 'ok';
        })
        .then(
          (v) => ((settled = true), v),
          (e) => ((settled = true), e),
        );
      await flush();
      assert.equal(settled, false, 'waits for the release');
      release.resolve();
      const outcome = await run;
      if (fails) assert.equal(outcome.message, 'callback failed');
      else assert.equal(outcome, 'ok');
      const acquire = store.calls.find((c) => c.method === 'acquire');
      const releases = store.calls.filter((c) => c.method === 'release');
      assert.equal(releases.length, 1);
      assert.equal(releases[0].owner, acquire.owner);
    }
  });

  test('a failed release is ignored', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock, {
      release: async () => {
        throw new Error('gone');
      },
    });
    assert.equal(await pipelineOn(clock, { key: 'k', store }).execute(() => 'v'), 'v');
  });

  test('owner ids are fresh for every acquisition', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const pipeline = pipelineOn(clock, { key: 'k', store });
    await pipeline.execute(() => 1);
    await pipeline.execute(() => 1);
    const owners = store.calls.filter((c) => c.method === 'acquire').map((c) => c.owner);
    assert.equal(new Set(owners).size, 2);
    assert.match(owners[0], /^([^:]+:[\d.]+:)?[0-9a-f]{32}$/, "host:pid:, then 32 random hex digits");
  });
});

describe('cancellation', () => {
  test('aborted while waiting: rejects with the reason, leaves the queue, never runs', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'k', wait: '1m' });
    const holding = deferred();
    const holder = pipeline.execute(() => holding.promise);
    const controller = new AbortController();
    let ran = false;
    const waiter = pipeline.execute(() => (ran = true), { signal: controller.signal }).catch((e) => e);
    const third = pipeline.execute(() => 'third');
    const reason = new Error('caller gave up');
    controller.abort(reason);
    holding.resolve();
    assert.equal(await waiter, reason);
    await holder;
    assert.equal(await third, 'third');
    assert.equal(ran, false);
  });

  // (The abort between the grant and the run is in faults.test.mjs.)
  test('aborted just before the holder releases: the callback never runs, the key is not kept', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'k', wait: '1m' });
    const blocking = deferred();
    const h2 = pipeline.execute(() => blocking.promise);
    let ran2 = false;
    const c2 = new AbortController();
    const w2 = pipeline.execute(() => (ran2 = true), { signal: c2.signal }).catch((e) => e);
    c2.abort('stop');
    blocking.resolve();
    await h2;
    assert.equal(await w2, 'stop');
    assert.equal(ran2, false);
    assert.equal(await pipeline.execute(() => 'free', { signal: AbortSignal.timeout(1000) }), 'free');
  });

  test('an already aborted signal rejects at once', async () => {
    const pipeline = pipelineOn(new FakeTimeProvider(), { key: 'k' });
    const controller = new AbortController();
    controller.abort(new Error('before'));
    await assert.rejects(pipeline.execute(() => 1, { signal: controller.signal }), /before/);
  });

  test('a key function that aborts the signal: rejects with the reason at once, does not wait for the key', async () => {
    const clock = new FakeTimeProvider();
    const controller = new AbortController();
    const reason = new Error('aborted while choosing the key');
    const pipeline = pipelineOn(clock, {
      key: () => {
        controller.abort(reason);
        return 'k';
      },
      wait: '1m',
    });
    const holding = deferred();
    const holder = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k' }).build().execute(() => holding.promise);
    let ran = false;
    const outcome = pipeline.execute(() => (ran = true), { signal: controller.signal }).catch((e) => e);
    // No time passes: a waiter would still be waiting, with its minute ahead of it.
    await flush(5);
    const settled = await Promise.race([outcome, Promise.resolve('still waiting')]);
    assert.equal(settled, reason);
    assert.equal(ran, false);
    holding.resolve();
    await holder;
    // The key was not kept by the execution that gave up.
    assert.equal(await pipelineOn(clock, { key: 'k' }).execute(() => 'free'), 'free');
  });

  test('aborted while running: the callback signal aborts with the caller reason', async () => {
    const pipeline = pipelineOn(new FakeTimeProvider(), { key: 'k' });
    const controller = new AbortController();
    const result = await pipeline.execute(
      async ({ signal }) => {
        controller.abort('caller reason');
        return [signal.aborted, signal.reason];
      },
      { signal: controller.signal },
    );
    assert.deepEqual(result, [true, 'caller reason']);
  });

  test('a signal read after the abort is created aborted', async () => {
    const pipeline = pipelineOn(new FakeTimeProvider(), { key: 'k' });
    const controller = new AbortController();
    const reason = await pipeline.execute(
      (context) => {
        controller.abort('late');
        return context.signal.reason;
      },
      { signal: controller.signal },
    );
    assert.equal(reason, 'late');
  });
});

describe('stores that fail', () => {
  test('a store that throws on acquire: LockStoreError with key, method and the error as cause', async () => {
    const clock = new FakeTimeProvider();
    const boom = new Error('ECONNREFUSED');
    for (const acquire of [
      async () => {
        throw boom;
      },
      () => {
        throw boom;
      },
    ]) {
      let ran = false;
      const store = recordingStore(clock, { acquire });
      const error = await pipelineOn(clock, { key: 'acct:9', store })
        .execute(() => (ran = true))
        .catch((e) => e);
      assert.ok(error instanceof LockStoreError);
      assert.ok(error instanceof Error, 'LockStoreError is an Error');
      assert.equal(error.name, 'LockStoreError');
      assert.equal(error.code, 'LOCK_STORE_FAILED');
      assert.equal(error.key, 'acct:9');
      assert.equal(error.method, 'acquire');
      assert.equal(error.cause, boom);
      assert.equal(ran, false);
    }
  });

  test('a wrong answer shape is a LockStoreError saying what was expected', async () => {
    const clock = new FakeTimeProvider();
    for (const [answer, expected] of [
      [{ token: 1 }, /fencingToken/],
      [7, /acquire must resolve to \{ fencingToken/],
      [{ fencingToken: -1 }, /non-negative/],
      [{ fencingToken: 1.5 }, /fencingToken/],
    ]) {
      const store = recordingStore(clock, { acquire: async () => answer });
      const error = await pipelineOn(clock, { key: 'k', store })
        .execute(() => 1)
        .catch((e) => e);
      assert.ok(error instanceof LockStoreError, String(error));
      assert.match(error.message, expected);
    }
    const store = recordingStore(clock, { renew: async () => 'yes' });
    const seen = [];
    const run = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => seen.push(e) })
      .addLock({ key: 'k', store, ttl: 3000 })
      .build()
      .execute(async () => {
        await advance(clock, 1000);
      });
    await run;
    const failed = seen.find((e) => e.type === 'renewalFailed');
    assert.match(failed.error.message, /renew must resolve to a boolean/);
  });

  test('an acquire the store never answers is abandoned after ttl; a late grant is released', async () => {
    const clock = new FakeTimeProvider();
    const late = deferred();
    const store = recordingStore(clock, { acquire: () => late.promise });
    const error = pipelineOn(clock, { key: 'k', store, ttl: 1000, wait: '1m' })
      .execute(() => 'ran')
      .catch((e) => e);
    await advance(clock, 1000, 100);
    const e = await error;
    assert.ok(e instanceof LockStoreError);
    assert.match(e.message, /did not answer/);
    late.resolve({ fencingToken: 5 });
    await flush();
    const release = store.calls.find((c) => c.method === 'release');
    assert.ok(release, 'the late lease is released');
    assert.equal(release.owner, store.calls[0].owner);
  });
});

describe('nesting', () => {
  test('first added is outermost; the innermost token is ambient; releases go innermost first', async () => {
    const clock = new FakeTimeProvider();
    const outerStore = recordingStore(clock);
    const innerStore = new MemoryLockStore({ timeProvider: clock });
    await innerStore.acquire('warm-up', 'x', 1000); // moves the inner store's tokens on
    const order = [];
    const wrap = (name, store) => ({
      acquire: (...a) => (order.push(`${name}.acquire`), store.acquire(...a)),
      renew: (...a) => store.renew(...a),
      release: (...a) => (order.push(`${name}.release`), store.release(...a)),
    });
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'outer', store: wrap('outer', outerStore) })
      .addLock({ key: 'inner', store: wrap('inner', innerStore) })
      .build();
    const token = await pipeline.execute(() => {
      order.push('callback');
      return getLockToken();
    });
    assert.equal(token, 2, 'the inner store issued 2 (its second grant)');
    assert.deepEqual(order, ['outer.acquire', 'inner.acquire', 'callback', 'inner.release', 'outer.release']);
  });

  test('nested executions: getLockToken is the innermost execution token, then the outer again', async () => {
    const clock = new FakeTimeProvider();
    const a = pipelineOn(clock, { key: 'a' });
    const b = pipelineOn(clock, { key: 'b' });
    const seen = await a.execute(async (outerContext) => {
      const outer = getLockToken();
      const [inner, innerProperty] = await b.execute(async (innerContext) => {
        await flush(1);
        return [getLockToken(), innerContext.properties.get(LOCK_TOKEN)];
      });
      return { outer, outerProperty: outerContext.properties.get(LOCK_TOKEN), inner, innerProperty, after: getLockToken() };
    });
    assert.equal(typeof seen.inner, 'number', 'a token inside the inner execution');
    assert.equal(seen.inner, seen.innerProperty, "the inner execution's own token");
    assert.equal(seen.outer, seen.outerProperty);
    assert.notEqual(seen.outer, seen.inner);
    assert.equal(seen.after, seen.outer);
  });

  test('work a nested execution left behind reads the outer token while the outer holds its lock, then undefined', async () => {
    const clock = new FakeTimeProvider();
    const a = pipelineOn(clock, { key: 'a' });
    const b = pipelineOn(clock, { key: 'b' });
    const innerDone = deferred();
    const outerDone = deferred();
    let whileOuter;
    let afterOuter;
    const outer = await a.execute(async () => {
      const token = getLockToken();
      const inner = await b.execute(() => {
        // Detached: each continuation runs after the execution that started it settled.
        whileOuter = innerDone.promise.then(() => getLockToken());
        afterOuter = outerDone.promise.then(() => getLockToken());
        return getLockToken();
      });
      assert.notEqual(inner, token);
      innerDone.resolve();
      assert.equal(await whileOuter, token, "the inner lock is gone, the outer one is not: the outer's token");
      return token;
    });
    assert.equal(typeof outer, 'number');
    outerDone.resolve();
    assert.equal(await afterOuter, undefined, 'both locks are gone');
  });
});

describe('the default store', () => {
  test('pipelines on one time provider share one memory store', async () => {
    const clock = new FakeTimeProvider();
    const a = pipelineOn(clock, { key: 'shared' });
    const b = pipelineOn(clock, { key: 'shared' });
    const holding = deferred();
    const first = a.execute(() => holding.promise);
    await assert.rejects(b.execute(() => 1), LockNotAcquiredError);
    // Another time provider has its own default store.
    assert.equal(await pipelineOn(new FakeTimeProvider(), { key: 'shared' }).execute(() => 'other'), 'other');
    holding.resolve();
    await first;
  });

  test('the system clock pipelines share one store too', async () => {
    const a = new ResiliencePipelineBuilder().addLock({ key: 'sys-shared' }).build();
    const b = new ResiliencePipelineBuilder().addLock({ key: 'sys-shared' }).build();
    const holding = deferred();
    const first = a.execute(() => holding.promise);
    await assert.rejects(b.execute(() => 1), LockNotAcquiredError);
    holding.resolve();
    await first;
    assert.equal(await b.execute(() => 'free'), 'free');
  });
});

describe('telemetry and settle', () => {
  test('events: acquired (waited, token) → renewed → released, with key and name', async () => {
    const clock = new FakeTimeProvider();
    const events = [];
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
      .addLock({ key: 'k', ttl: 3000, name: 'report-lock' })
      .build();
    await pipeline.execute(async () => {
      await advance(clock, 1000);
    });
    assert.deepEqual(
      events.map((e) => e.type),
      ['acquired', 'renewed', 'released'],
    );
    assert.equal(events[0].waitedMs, 0);
    assert.equal(typeof events[0].fencingToken, 'number');
    assert.ok(events.every((e) => e.key === 'k' && e.name === 'report-lock'));
  });

  test('a throwing telemetry callback does not break the lock', async () => {
    const pipeline = new ResiliencePipelineBuilder({
      timeProvider: new FakeTimeProvider(),
      telemetry: () => {
        throw new Error('telemetry down');
      },
    })
      .addLock({ key: 'k' })
      .build();
    assert.equal(await pipeline.execute(() => 'fine'), 'fine');
  });

  test('settle never rejects', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = pipelineOn(clock, { key: 'k' });
    assert.deepEqual(await pipeline.settle(() => 3), { ok: true, value: 3 });
    const holding = deferred();
    const first = pipeline.execute(() => holding.promise);
    const busy = await pipeline.settle(() => 1);
    assert.equal(busy.ok, false);
    assert.ok(busy.error instanceof LockNotAcquiredError);
    holding.resolve();
    await first;
    const failed = await pipeline.settle(() => {
      throw new Error('x');
    });
    assert.equal(failed.error.message, 'x');
    const bad = await pipeline.settle('not a function');
    assert.ok(bad.error instanceof TypeError);
  });
});

// A JS store's answer may run or settle its execution in the engine's status word, and
// its renewals and release come without text (the host keeps the acquire's key and
// owner): what that must not change.
describe("a JS store's answers", () => {
  test('telemetry events arrive in order, before the execution settles, with another execution in flight', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const events = [];
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
      .addLock({ key: (ctx) => ctx.operationKey, store, ttl: 3000 })
      .build();
    const settledAt = {};
    const a = pipeline
      .execute(async () => advance(clock, 1000), { operationKey: 'a' })
      .then(() => (settledAt.a = events.length));
    const b = pipeline.execute(async () => 'b', { operationKey: 'b' }).then(() => (settledAt.b = events.length));
    await Promise.all([a, b]);
    const of = (key) => events.filter((e) => e.key === key).map((e) => e.type);
    assert.deepEqual(of('a'), ['acquired', 'renewed', 'released']);
    assert.deepEqual(of('b'), ['acquired', 'released']);
    const last = (key) => events.findLastIndex((e) => e.key === key) + 1;
    assert.ok(settledAt.a >= last('a') && settledAt.b >= last('b'), 'released before settled');
    const token = (key) => events.find((e) => e.key === key && e.type === 'acquired').fencingToken;
    assert.equal(events.find((e) => e.key === 'a' && e.type === 'renewed').fencingToken, token('a'));
  });

  test("each lock's renewals and release carry that lock's key and owner, innermost released first", async () => {
    const clock = new FakeTimeProvider();
    const outer = recordingStore(clock);
    const inner = recordingStore(clock);
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'outer', store: outer, ttl: 3000 })
      .addLock({ key: (ctx) => `inner:${ctx.operationKey}`, store: inner, ttl: 6000 })
      .build();
    const token = await pipeline.execute(
      async () => {
        await advance(clock, 2000, 100);
        return getLockToken();
      },
      { operationKey: 'x' },
    );
    assert.equal(token, 1, "the inner store's token");
    for (const [store, key] of [
      [outer, 'outer'],
      [inner, 'inner:x'],
    ]) {
      const [acquire, ...rest] = store.calls;
      assert.equal(acquire.method, 'acquire');
      assert.deepEqual(
        rest.map((c) => c.method),
        [...rest.slice(0, -1).map(() => 'renew'), 'release'],
      );
      assert.ok(rest.length >= 2, `${key} was renewed`);
      assert.ok(
        store.calls.every((c) => c.key === key && c.owner === acquire.owner),
        `${key}: ${JSON.stringify(store.calls)}`,
      );
    }
    assert.ok(inner.times('release')[0] <= outer.times('release')[0]);
    assert.notEqual(outer.calls[0].owner, inner.calls[0].owner);
  });

  test('synchronous callbacks run from the answer: value and error, and the next one waits its turn', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const pipeline = pipelineOn(clock, { key: 'k', store, wait: '1s' });
    const order = [];
    const runs = Promise.allSettled([
      pipeline.execute(() => (order.push(1), 'one')),
      pipeline.execute(() => {
        order.push(2);
        throw new RangeError('two');
      }),
      pipeline.execute(() => (order.push(3), getLockToken())),
    ]);
    await advance(clock, 1000, 50);
    const [one, two, three] = await runs;
    assert.deepEqual(one, { status: 'fulfilled', value: 'one' });
    assert.ok(two.reason instanceof RangeError);
    assert.equal(three.status, 'fulfilled');
    assert.deepEqual(order, [1, 2, 3]);
    assert.equal(store.calls.filter((c) => c.method === 'release').length, 3);
  });

  test('a release answered after the lease was lost rejects with the loss, caused by the callback error', async () => {
    const clock = new FakeTimeProvider();
    const release = deferred();
    const store = recordingStore(clock, {
      renew: () => new Promise(() => {}),
      release: (...a) => release.promise.then(() => store.base.release(...a)),
    });
    const run = pipelineOn(clock, { key: 'k', store, ttl: 3000 })
      .execute(async (context) => {
        await advance(clock, 3000, 100);
        assert.equal(context.signal.aborted, true);
        throw new Error('wrote nothing');
      })
      .catch((e) => e);
    await advance(clock, 0);
    release.resolve();
    const error = await run;
    assert.ok(error instanceof LockLostError, String(error));
    assert.equal(error.key, 'k');
    assert.equal(error.cause?.message, 'wrote nothing');
    const [acquire] = store.calls;
    assert.deepEqual(
      store.calls.filter((c) => c.method === 'release').map((c) => [c.key, c.owner]),
      [['k', acquire.owner]],
    );
  });

  test('a manual lease on a JS store names its owner and releases as it', async () => {
    const clock = new FakeTimeProvider();
    const store = recordingStore(clock);
    const lease = await acquireLock(store, 'job', '10s', { timeProvider: clock, autoRenew: true });
    const [acquire] = store.calls;
    assert.equal(lease.owner, acquire.owner);
    await advance(clock, 4000, 1000);
    assert.equal(await lease.extend('20s'), true);
    assert.equal(await lease.release(), true);
    assert.ok(store.calls.slice(1).every((c) => c.key === 'job' && c.owner === acquire.owner));
    assert.deepEqual(
      store.calls.map((c) => c.method),
      ['acquire', 'renew', 'renew', 'release'],
      'renewed at 3333 ms, then extended',
    );
    const lapsed = await acquireLock(recordingStore(clock, { release: async () => false }), 'job', '10s', {
      timeProvider: clock,
    });
    assert.equal(await lapsed.release(), false, "the store's answer: not held");
  });
});

describe('fake time', () => {
  // `advance(ttl / 3)` is the natural way to step through renewals; fractions of a
  // millisecond must not add up to time that never passed.
  test('advance by fractions of a millisecond moves the clock by their sum, not more', async () => {
    const clock = new FakeTimeProvider();
    for (let i = 0; i < 3; i++) clock.advance(1000 / 3);
    assert.equal(clock.now(), 1000, '3 × advance(1000 / 3)');
    const halves = new FakeTimeProvider(1.5);
    assert.equal(halves.now(), 1.5);
    halves.advance(0.25);
    assert.equal(halves.now(), 1.75);
    halves.advance(0.25);
    assert.equal(halves.now(), 2);
    const tenths = new FakeTimeProvider();
    for (let i = 0; i < 10; i++) tenths.advance(0.1);
    assert.ok(tenths.now() <= 1, `10 × advance(0.1) moved the clock to ${tenths.now()}`);
    const store = new MemoryLockStore({ timeProvider: tenths });
    assert.ok(await store.acquire('k', 'o', 1001));
    for (let i = 0; i < 3; i++) tenths.advance(1000 / 3);
    assert.equal(await store.isLocked('k'), true, 'a 1001 ms lease lapsed after 1000 ms of advances');
  });
});
