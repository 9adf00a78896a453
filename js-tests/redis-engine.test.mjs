// RedisLockStore driven by the real engine (SPEC §1 and §4), against real Redis servers
// only: a fleet of processes excluding each other on one key, a restart that loses the
// data while a lease is held, wake-on-release through pub/sub (and polling without it),
// Redis errors as LockStoreError, and a 3-master cluster. Nothing is mocked; every wait
// is bounded. Run: node --test js-tests/redis-engine.test.mjs
// (LEASEHOLD_ENGINE=wasm runs it on the wasm engine.)

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import {
  engine,
  FakeTimeProvider,
  ResiliencePipelineBuilder,
  LockLostError,
  LockStoreError,
  getLockToken,
} from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { call, freePort, startRedisCluster, startRedisServer, waitFor } from './support/redis.mjs';
import { within } from './support/async.mjs';
import {
  closeIoredis,
  closeNodeRedis,
  connectIoredis,
  connectNodeRedis,
  unreachableIoredis,
  unreachableNodeRedis,
} from './support/redis-clients.mjs';
import { FLEET_DONE_MS, FLEET_READY_MS, startFleetWorker } from './support/fleet.mjs';
import { uniqueKey } from './support/keys.mjs';
import { advance, deferred, flush } from './support/time.mjs';

// Counted for the whole file: a lost lease, a restart or a dead server must never
// leave a rejection unhandled.
const unhandled = [];
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason);
});

// ---------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------

const noop = () => {};

const lock = (options) => new ResiliencePipelineBuilder().addLock(options).build();
const ms = (x) => `${Math.round(x)} ms`;

const KINDS = [
  {
    name: 'ioredis',
    connect: connectIoredis,
    unreachable: unreachableIoredis,
    close: closeIoredis,
  },
  {
    name: 'node-redis',
    connect: connectNodeRedis,
    unreachable: unreachableNodeRedis,
    close: closeNodeRedis,
  },
];

// Everything opened here is closed in the top-level after().
const clients = []; // [kind, client]
const stores = [];
async function newClient(kind, port) {
  const client = await kind.connect(port);
  clients.push([kind, client]);
  return client;
}
function newStore(options) {
  const store = new RedisLockStore(options);
  stores.push(store);
  return store;
}

/**
 * Records every `acquire` of `store` (the fake time it was called at, whether it has
 * been answered, the answer) by replacing the method on the instance only: the object
 * stays the real RedisLockStore, `subscribe` included, so the engine still sees a store
 * that grants on release. A call is recorded when it is made, before its answer.
 */
function spyOnAcquire(store, clock) {
  const calls = [];
  const original = store.acquire;
  store.acquire = function acquire(...args) {
    const entry = { at: clock.now(), answered: false, answer: undefined };
    calls.push(entry);
    return original.apply(this, args).then((answer) => {
      entry.answered = true;
      entry.answer = answer;
      return answer;
    });
  };
  return calls;
}

// ---------------------------------------------------------------------------------
// servers
// ---------------------------------------------------------------------------------

let server; // shared by the handover, error and restart-free tests
let fleetServer;
let restartServer; // restarted (data lost) by the restart test
let cluster;

before(async () => {
  [server, fleetServer, restartServer, cluster] = await Promise.all([
    startRedisServer(),
    startRedisServer(),
    startRedisServer(),
    startRedisCluster({ masters: 3 }),
  ]);
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const [kind, client] of clients) {
    try {
      await kind.close(client);
    } catch {
      // already closed
    }
  }
  await Promise.allSettled([server?.stop(), fleetServer?.stop(), restartServer?.stop(), cluster?.stop()]);
  assert.deepEqual(unhandled, [], 'no unhandled rejection in the whole file');
});

test(`the engine in use is the one asked for (${engine})`, () => {
  assert.equal(engine, process.env.LEASEHOLD_ENGINE || 'native');
});

// ---------------------------------------------------------------------------------
// 1. a fleet of processes on one key
// ---------------------------------------------------------------------------------

const WORKER = fileURLToPath(new URL('./support/redis-worker.mjs', import.meta.url));

/** Starts one worker process; resolves its `ready` and `result` lines. */
function startWorker(kind, port, key, count) {
  return { kind, ...startFleetWorker(WORKER, [kind, String(port), key, String(count)], kind) };
}

describe('a fleet of processes on one key', () => {
  const WORKERS = 8;
  const EACH = 200;

  // Under load, two processes spin on the 2 cores beside the fleet: the processes are
  // descheduled at odd moments, and messages and answers arrive in unusual orders (that
  // is how a grant released while its owner held the lease was found).
  for (const busy of [0, 2]) {
    test(`${WORKERS} processes x ${EACH} executions (ioredis and node-redis)${busy ? `, ${busy} busy processes beside` : ''}: one holder at a time, unique increasing tokens`, async (t) => {
      const key = busy ? 'nightly-report-busy' : 'nightly-report';
      const workers = [];
      const spinners = [];
      try {
        for (let i = 0; i < WORKERS; i++) {
          workers.push(startWorker(i % 2 === 0 ? 'ioredis' : 'node-redis', fleetServer.port, key, EACH));
        }
        const ready = await within(FLEET_READY_MS, 'every worker connected', Promise.all(workers.map((w) => w.ready)));
        for (const r of ready) assert.equal(r.engine, engine, 'the workers run the same engine');
        for (let i = 0; i < busy; i++) {
          spinners.push(spawn(process.execPath, ['-e', 'for (const end = Date.now() + 60_000; Date.now() < end; );'], { stdio: 'ignore' }));
        }
        const started = performance.now();
        for (const w of workers) w.go();
        const results = await within(FLEET_DONE_MS, 'the fleet finished', Promise.all(workers.map((w) => w.result)));
        const wall = performance.now() - started;
        t.diagnostic(
          `fleet wall time: ${ms(wall)} for ${WORKERS * EACH} executions ` +
            `(${(wall / (WORKERS * EACH)).toFixed(2)} ms each); per worker: ` +
            results.map((r) => `${r.kind} ${r.elapsedMs} ms`).join(', '),
        );
        const exits = await within(5000, 'the workers exited', Promise.all(workers.map((w) => w.exited)));
        assert.deepEqual(exits, workers.map(() => ({ code: 0, signal: null })));

        for (const r of results) {
          assert.deepEqual(r.errors, [], `${r.kind}: no execution failed`);
          assert.equal(r.completed, EACH, `${r.kind}: every execution completed`);
        }
        assert.equal(results.reduce((n, r) => n + r.completed, 0), WORKERS * EACH);
        assert.equal(Math.max(...results.map((r) => r.max)), 1, 'never two holders at once');
        for (const r of results) assert.equal(r.max, 1, `${r.kind} saw the counter at 1 every time`);
        assert.equal(await call(fleetServer.port, ['GET', `fleet-counter:${key}`]), '0');

        // Tokens: numbers, unique across the fleet, increasing within each worker...
        const all = results.flatMap((r) => r.records);
        assert.equal(all.length, WORKERS * EACH);
        for (const [, token] of all) assert.ok(Number.isSafeInteger(token) && token > 0, `token ${token}`);
        assert.equal(new Set(all.map(([, token]) => token)).size, all.length, 'tokens are unique across the fleet');
        for (const r of results) {
          for (let i = 1; i < r.records.length; i++) {
            assert.ok(r.records[i][1] > r.records[i - 1][1], `${r.kind}: its tokens increase (${r.records[i - 1][1]} then ${r.records[i][1]})`);
          }
        }
        // ...and strictly increasing in the order the critical sections ran across the
        // fleet (an INCR taken inside the lock, valid because the lock excludes).
        all.sort((a, b) => a[0] - b[0]);
        assert.deepEqual(all.map(([order]) => order), Array.from({ length: all.length }, (_, i) => i + 1));
        for (let i = 1; i < all.length; i++) {
          assert.ok(all[i][1] > all[i - 1][1], `section ${all[i][0]} has token ${all[i][1]} > ${all[i - 1][1]}`);
        }
        const perWorker = results.map((r) => r.completed);
        t.diagnostic(`acquisitions per worker: ${perWorker.join(', ')}`);
      } finally {
        for (const spinner of spinners) spinner.kill('SIGKILL');
        for (const w of workers) {
          if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
        }
      }
    });
  }
});

// ---------------------------------------------------------------------------------
// 2. a restart that loses the data while a lease is held
// ---------------------------------------------------------------------------------

describe('Redis restarts without persistence while a lease is held', () => {
  // The engine runs on a fake clock: renewals (every ttl/3 = 1000 ms) come when the test
  // moves the clock, so the restart falls between two renewals by construction.
  test('the holder loses the lease at its next renewal, once, and later tokens are larger', async () => {
    const kind = KINDS[0];
    const client = await newClient(kind, restartServer.port);
    const store = newStore({ client, prefix: 'restart' });
    const key = uniqueKey('restart');
    const clock = new FakeTimeProvider();
    // Every store call (recorded when made), so the test can wait for their answers.
    const pending = new Set();
    const renewedAt = [];
    for (const method of ['acquire', 'renew', 'release']) {
      const original = store[method];
      store[method] = function (...args) {
        if (method === 'renew') renewedAt.push(clock.now());
        const call = original.apply(this, args);
        pending.add(call);
        const done = () => pending.delete(call);
        call.then(done, done);
        return call;
      };
    }
    const lostCalls = [];
    const events = [];
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push({ ...e, at: clock.now() }) })
      .addLock({ key, store, ttl: '3s', onLockLost: (info) => lostCalls.push({ info, at: clock.now() }) })
      .build();

    // Tokens issued before the restart: a few plain executions, then the holder's.
    const issued = [];
    for (let i = 0; i < 3; i++) issued.push(await pipeline.execute(() => getLockToken()));

    const holding = deferred();
    let acquiredAt;
    let abortedAt;
    let abortReason;
    let abortedContext;
    const execution = pipeline.execute(async (context) => {
      acquiredAt = clock.now();
      issued.push(getLockToken());
      holding.resolve();
      await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
      abortedAt = clock.now();
      abortReason = context.signal.reason;
      abortedContext = context;
      throw new Error('stopped: the lease is gone');
    });
    const outcome = execution.then(
      () => assert.fail('the execution should have been rejected'),
      (e) => e,
    );
    await within(5000, 'the holder started', holding.promise);
    // The first renewal (at 1000 ms), before the restart: the restart happens mid-lease
    // with the next renewal (at 2000 ms) still ahead.
    await advance(clock, 1000);
    await waitFor('the first renewal', () => events.some((e) => e.type === 'renewed'), { timeoutMs: 10_000, intervalMs: 2 });
    assert.equal(abortedAt, undefined, 'still holding before the restart');

    await restartServer.restart();
    assert.equal(await call(restartServer.port, ['DBSIZE']), 0, 'the restarted server lost every key');
    await within(10_000, 'the client reconnected', client.ping());
    await flush();
    assert.equal(abortedAt, undefined, 'not lost before the next renewal');
    assert.equal(lostCalls.length, 0);

    // The next renewal finds the lease gone.
    await advance(clock, 999);
    assert.deepEqual(renewedAt, [acquiredAt + 1000], 'no renewal before it is due');
    await advance(clock, 1);
    assert.deepEqual(renewedAt, [acquiredAt + 1000, acquiredAt + 2000]);
    const error = await within(10_000, 'the execution settled after the renewal', outcome);
    assert.ok(abortedAt !== undefined, 'the signal aborted');
    assert.equal(abortedAt, acquiredAt + 2000, 'lost at the first renewal after the restart (the second, ttl/3 apart)');
    assert.ok(abortReason instanceof LockLostError, `abort reason: ${abortReason?.name}: ${abortReason?.message}`);
    assert.equal(abortReason.key, key);
    assert.ok(error instanceof LockLostError, `execution error: ${error?.name}: ${error?.message}`);
    assert.equal(error.key, key);
    assert.match(String(error.cause?.message), /stopped: the lease is gone/);

    // A second loss report would come from a later renewal or from the lease's expiry
    // (at 3000 ms after the last renewal): run the clock well past both, and wait for
    // the answer to every store call made meanwhile.
    await advance(clock, 10_000, 500);
    await waitFor('every store call answered', () => pending.size === 0, { timeoutMs: 10_000, intervalMs: 2 });
    await flush();
    assert.deepEqual(renewedAt, [acquiredAt + 1000, acquiredAt + 2000], 'no renewal after the loss');
    assert.equal(lostCalls.length, 1, 'onLockLost called exactly once');
    assert.equal(lostCalls[0].info.key, key);
    assert.equal(lostCalls[0].info.context, abortedContext);
    assert.equal(events.filter((e) => e.type === 'lost').length, 1, 'one lost event');

    // A new holder after the restart: its token exceeds every token issued before.
    const next = await within(5000, 'a new holder after the restart', pipeline.execute(() => getLockToken()));
    const maxBefore = Math.max(...issued);
    assert.ok(Number.isSafeInteger(next) && next > maxBefore, `new token ${next} > ${maxBefore}`);
    assert.deepEqual(unhandled, [], 'no unhandled rejection');
  });
});

// ---------------------------------------------------------------------------------
// 3. wake-on-release, and polling without it
// ---------------------------------------------------------------------------------

/**
 * A holds the key through its own client and store; B waits for it through another
 * (as another process would), on a fake clock: B polls only when the test moves the
 * clock. The test drives B's polls to where they have backed off (tries at 0, 50, 150,
 * 350, 750 and 1550 ms; the 6th schedules the next one 1000 ms later, at 2550 ms), then
 * A releases while the clock stands still at 1550 ms. From then on B can run without
 * the clock moving only if the release reached it (a grant or an announcement); a poll
 * needs the clock at 2550 ms. Resolves once A has settled, to B's execution, its tries
 * ({ at: fake ms, answered, answer }) and the clock. `connect()` opens a client
 * (standalone by default); `beforeRelease(key)` runs just before A releases.
 */
/**
 * Waits until `listener`'s subscriber connection is live: B's store queues its owner
 * (and so can be granted the lease) only once it listens for grants, from its first
 * subscription on. B's polls on the fake clock take a few ms of real time; opening that
 * connection (to every node of a cluster) can take longer. `releaser` takes and releases
 * `probe` until `listener` hears of it.
 */
async function subscriberLive(listener, releaser, probe) {
  let heard = false;
  const stop = listener.subscribe(probe, () => {
    heard = true;
  });
  try {
    await waitFor(
      "the waiter's subscriber connection",
      async () => {
        if (await releaser.acquire(probe, 'probe', 1000)) await releaser.release(probe, 'probe');
        await flush();
        return heard;
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
  } finally {
    stop();
  }
}

async function handover(
  kind,
  { announce, connect = () => newClient(kind, server.port), prefix = 'handover', connectB = connect, prefixB = prefix, beforeRelease },
) {
  const key = uniqueKey(`handover-${kind.name}`);
  const clock = new FakeTimeProvider();
  const storeA = newStore({ client: await connect(), prefix });
  const realB = newStore({ client: await connectB(), prefix: prefixB });
  const tries = spyOnAcquire(realB, clock);
  // Without `subscribe` the engine can only poll.
  const storeB = announce
    ? realB
    : {
        acquire: (...args) => realB.acquire(...args),
        renew: (...args) => realB.renew(...args),
        release: (...args) => realB.release(...args),
      };
  assert.equal(typeof storeB.subscribe === 'function', announce);
  if (announce) await subscriberLive(realB, storeA, `${key}:probe`);

  // A runs on the real clock: its lease only has to outlast the test's few steps.
  const holdingA = deferred();
  const releaseA = deferred();
  const a = lock({ key, store: storeA, ttl: '30s' }).execute(async () => {
    holdingA.resolve();
    await releaseA.promise;
    return getLockToken();
  });
  await within(2000, 'A holds the key', holdingA.promise);

  const b = { ranAt: undefined, token: undefined };
  b.execution = new ResiliencePipelineBuilder({ timeProvider: clock })
    .addLock({ key, store: storeB, ttl: '30s', wait: '10s' })
    .build()
    .execute(() => {
      b.ranAt = clock.now();
      b.token = getLockToken();
    });
  const triesAnswered = (n) =>
    waitFor(`B's try ${n} answered`, () => tries.length >= n && tries[n - 1].answered, { timeoutMs: 10_000, intervalMs: 2 });
  await triesAnswered(1);
  for (const [i, delay] of [50, 100, 200, 400, 800].entries()) {
    await flush(); // the engine has taken the answer and set its next poll
    await advance(clock, delay);
    await triesAnswered(i + 2);
  }
  await flush();
  assert.deepEqual(tries.map((t) => t.at), [0, 50, 150, 350, 750, 1550], 'B tried at its poll instants, backing off');
  assert.ok(tries.every((t) => t.answer === undefined), 'every try found the key held');
  assert.equal(b.ranAt, undefined);
  await beforeRelease?.(key);

  releaseA.resolve();
  const tokenA = await within(5000, 'A settled', a);
  return { b, tries, tokenA, clock, lastPollAt: 1550, nextPollAt: 2550 };
}

/** The checks of a handover to a store that grants on release: B ran, the clock unmoved, with no try after the release. */
async function assertGranted(r) {
  await within(10_000, 'B ran (the clock standing still)', r.b.execution);
  assert.equal(r.clock.now(), r.lastPollAt, 'the clock never moved after the release');
  assert.equal(r.b.ranAt, r.lastPollAt, 'B ran before its next poll was due: the release reached it');
  // RedisLockStore grants on release: A's release handed the lease to B, queued by its
  // tries, and told B's store; B needed no try after the release (a try is recorded
  // when the engine makes it, before B could run on its answer).
  assert.equal(r.tries.length, 6, 'no try after the release: the release granted the lease');
  assert.ok(r.b.token > r.tokenA, `B's token ${r.b.token} > A's ${r.tokenA}`);
}

describe('wake-on-release', () => {
  for (const kind of KINDS) {
    test(`${kind.name}: a release wakes a waiter whose next poll is far away`, async () => {
      await assertGranted(await handover(kind, { announce: true }));
    });
  }

  test('a store without subscribe still hands over, by polling (later)', async () => {
    const r = await handover(KINDS[0], { announce: false });
    // Up to 1 ms before the poll nothing runs B: every try the engine makes is recorded
    // at once (its answer comes later), so a try before the poll would show here.
    await advance(r.clock, r.nextPollAt - r.lastPollAt - 1);
    assert.equal(r.tries.length, 6, 'no wake-up without subscribe: no try before the poll');
    assert.equal(r.b.ranAt, undefined);
    await advance(r.clock, 1);
    await within(10_000, 'B ran', r.b.execution);
    assert.equal(r.tries.length, 7, 'the next poll took the key');
    assert.equal(r.tries[6].at, r.nextPollAt, 'the winning try was the scheduled poll, 1000 ms after the last');
    assert.equal(r.b.ranAt, r.nextPollAt);
    assert.ok(r.b.token > r.tokenA, `B's token ${r.b.token} > A's ${r.tokenA}`);
  });

  // An announcement that arrives while the head waiter's try is in flight must not be
  // lost: that try's `held` answer was evaluated by Redis before the release, so the
  // engine tries again as soon as it lands instead of waiting for the next poll. Here B
  // runs on a fake clock, and the answer to its 2nd try (`held`, at 50 ms) is kept from
  // the engine until the release's announcement has reached B's store (the real one;
  // `subscribe` is the real store's): B must then run with the clock still at 50 ms,
  // its next poll (150 ms) never due.
  test(
    'a release announced while the waiter\'s try is in flight still wakes it (slow link)',
    async () => {
      const key = uniqueKey('in-flight');
      const prefix = 'in-flight';
      const clock = new FakeTimeProvider();
      const storeA = newStore({ client: await newClient(KINDS[0], server.port), prefix });
      const realB = newStore({ client: await newClient(KINDS[0], server.port), prefix });
      const tries = [];
      const secondEvaluated = deferred();
      const letSecondThrough = deferred();
      const storeB = {
        async acquire(...args) {
          tries.push(clock.now());
          const n = tries.length;
          const answer = await realB.acquire(...args);
          if (n === 2) {
            secondEvaluated.resolve(answer);
            await letSecondThrough.promise; // the answer is on its way back
          }
          return answer;
        },
        renew: (...args) => realB.renew(...args),
        release: (...args) => realB.release(...args),
        subscribe: (k, onReleased) => realB.subscribe(k, onReleased),
      };
      const holdingA = deferred();
      const releaseA = deferred();
      const a = lock({ key, store: storeA, ttl: '30s' }).execute(async () => {
        holdingA.resolve();
        await releaseA.promise;
      });
      await within(2000, 'A holds the key', holdingA.promise);
      let bRanAt;
      const b = new ResiliencePipelineBuilder({ timeProvider: clock })
        .addLock({ key, store: storeB, ttl: '30s', wait: '10s' })
        .build()
        .execute(() => {
          bRanAt = clock.now();
        });
      // B's first try found the key held, so the engine subscribed; once Redis has the
      // subscription, this listener (added after the engine's, so called after it)
      // tells the test that B's store has heard the release.
      const channel = `${prefix}:{${key}}:released`;
      await waitFor('B subscribed', async () => (await call(server.port, ['PUBSUB', 'NUMSUB', channel]))[1] >= 1, { timeoutMs: 10_000, intervalMs: 2 });
      const heard = deferred();
      const stopListening = realB.subscribe(key, () => heard.resolve());
      assert.equal(tries.length, 1);
      await flush();
      await advance(clock, 50);
      assert.deepEqual(tries, [0, 50], 'the 2nd try, at its poll');
      // Redis has answered B's 2nd try ("held"); the answer is still in flight.
      assert.equal(await within(10_000, "B's 2nd try", secondEvaluated.promise), undefined);
      releaseA.resolve();
      await within(5000, 'A settled', a);
      await within(10_000, "the release announced to B's store", heard.promise);
      stopListening();
      letSecondThrough.resolve();
      await within(10_000, 'B ran (the clock standing still)', b);
      assert.equal(clock.now(), 50);
      assert.equal(bRanAt, 50, 'B was woken, not left to its next poll');
      assert.deepEqual(tries, [0, 50, 50], 'one try after the in-flight answer, at once');
    },
  );
});

describe('handover through the Redis queue', () => {
  /** A holds `key` through `store` until `release()`; `settled()` then resolves to its token. */
  async function holdUntilReleased(store, key) {
    const holding = deferred();
    const released = deferred();
    const settled = lock({ key, store, ttl: '30s' }).execute(async () => {
      holding.resolve();
      await released.promise;
      return getLockToken();
    });
    await within(2000, 'A holds the key', holding.promise);
    return { release: () => released.resolve(), settled: () => within(2000, 'A settled', settled) };
  }

  // B's execution gives up waiting while its owner is queued in Redis: its last try at
  // the deadline takes it out of the queue, so A's release frees the key instead of
  // handing it to B, which no longer wants it. (A grant that still reaches a waiter
  // that gave up is released by its store: redis-store.test.mjs.)
  test('a waiter that gave up leaves the queue: the release frees the key', async () => {
    const key = uniqueKey('gave-up');
    const prefix = 'gave-up';
    const storeA = newStore({ client: await newClient(KINDS[0], server.port), prefix });
    const storeB = newStore({ client: await newClient(KINDS[0], server.port), prefix });
    const storeC = newStore({ client: await newClient(KINDS[0], server.port), prefix });
    const a = await holdUntilReleased(storeA, key);
    const b = lock({ key, store: storeB, ttl: '30s', wait: 150 }).execute(() => 'B ran');
    await assert.rejects(within(2000, 'B gives up', b), { code: 'LOCK_NOT_ACQUIRED' });
    const queued = await call(server.port, ['LLEN', `${prefix}:{${key}}:queue`]);
    assert.equal(queued, 0, "B's owner left the queue");
    a.release();
    const tokenA = await a.settled();
    assert.equal(await storeC.isLocked(key), false, 'the key is free once A released it');
    const tokenC = await within(2000, 'C ran', lock({ key, store: storeC, ttl: '30s' }).execute(() => getLockToken()));
    assert.ok(tokenC > tokenA, `C's token ${tokenC} > A's ${tokenA}`);
  });

  // A fail-fast execution on a store that grants on release does not leave its owner
  // queued in Redis: a release would otherwise hand the key to an owner that is gone.
  test('only executions that wait are queued in Redis; fail-fast ones are not', async () => {
    const key = uniqueKey('fail-fast');
    const prefix = 'fail-fast';
    const storeA = newStore({ client: await newClient(KINDS[0], server.port), prefix });
    const storeB = newStore({ client: await newClient(KINDS[0], server.port), prefix });
    const a = await holdUntilReleased(storeA, key);
    const waiter = lock({ key, store: storeB, ttl: '30s', wait: '10s' }).execute(() => getLockToken());
    const queue = `${prefix}:{${key}}:queue`;
    await waitFor('the waiter queued in Redis', async () => (await call(server.port, ['LLEN', queue])) === 1, { timeoutMs: 3000 });
    for (let i = 0; i < 5; i++) {
      await assert.rejects(lock({ key, store: storeB, ttl: '30s' }).execute(() => 'ran'), { code: 'LOCK_NOT_ACQUIRED' });
    }
    assert.equal(await call(server.port, ['LLEN', queue]), 1, 'the fail-fast tries left no owner in the queue');
    a.release();
    await a.settled();
    assert.ok(Number.isSafeInteger(await within(2000, 'the waiter ran', waiter)));
  });

  // Two processes' worth of stores, each looping executions on one key: every execution
  // completes, one at a time, with increasing tokens, whichever way each release goes
  // (handed over, or freed and taken again).
  test('executions looping on one key through two stores hold it one at a time, tokens increasing', async () => {
    const key = uniqueKey('loop');
    const stores = [0, 1].map(async () => newStore({ client: await newClient(KINDS[0], server.port), prefix: 'loop', handOffAfter: 5 }));
    const [s1, s2] = await Promise.all(stores);
    let holders = 0;
    let maxHolders = 0;
    const tokens = [];
    const loop = async (store) => {
      const pipeline = lock({ key, store, ttl: '10s', wait: '10s' });
      for (let i = 0; i < 100; i++) {
        await pipeline.execute(async () => {
          holders += 1;
          maxHolders = Math.max(maxHolders, holders);
          tokens.push(getLockToken());
          await sleep(0);
          holders -= 1;
        });
      }
    };
    await within(20_000, 'both loops', Promise.all([loop(s1), loop(s2)]));
    assert.equal(maxHolders, 1);
    assert.equal(tokens.length, 200);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${i} increases`);
  });
});

// ---------------------------------------------------------------------------------
// 4. Redis errors become LockStoreError
// ---------------------------------------------------------------------------------

describe('Redis errors become LockStoreError', () => {
  for (const kind of KINDS) {
    test(`${kind.name}: no server behind the client: execute rejects fast, the callback never runs`, async () => {
      const dead = await kind.unreachable(await freePort());
      clients.push([kind, dead]);
      const store = newStore({ client: dead });
      const thrown = [];
      const acquire = store.acquire;
      store.acquire = function (...args) {
        return acquire.apply(this, args).catch((error) => {
          thrown.push(error);
          throw error;
        });
      };
      const key = uniqueKey('no-server');
      let ran = false;
      const started = performance.now();
      const error = await within(
        3000,
        'execute against no server',
        lock({ key, store, ttl: '5s', wait: '2s' })
          .execute(() => {
            ran = true;
          })
          .then(
            () => assert.fail('execute resolved'),
            (e) => e,
          ),
      );
      const took = performance.now() - started;
      assert.equal(ran, false, 'the callback never ran');
      assert.ok(error instanceof LockStoreError, `${error?.name}: ${error?.message}`);
      assert.equal(error.code, 'LOCK_STORE_FAILED');
      assert.equal(error.method, 'acquire');
      assert.equal(error.key, key);
      assert.equal(thrown.length, 1, 'one acquire, no retry of a failure');
      assert.equal(error.cause, thrown[0], "the cause is the client's own error, unchanged");
      assert.ok(error.cause instanceof Error && !(error.cause instanceof LockStoreError));
      assert.match(error.cause.message, /writeable|closed|ECONNREFUSED|connect/i);
      assert.ok(took < 1000, `rejected in ${ms(took)}`);
    });
  }
});

// ---------------------------------------------------------------------------------
// 5. Redis Cluster
// ---------------------------------------------------------------------------------

describe('Redis Cluster, 3 masters', () => {
  test('execute, getLockToken and release through an ioredis Cluster client, keys on different masters', async () => {
    const client = new Redis.Cluster(cluster.nodes, { lazyConnect: true });
    client.on('error', noop);
    clients.push([{ close: (c) => c.disconnect() }, client]);
    await client.connect();
    const prefix = 'cluster';
    const store = newStore({ client, prefix });

    // One key per master: the store's lease name for key k is `${prefix}:{k}`.
    const byPort = new Map();
    for (let i = 0; byPort.size < cluster.ports.length; i++) {
      assert.ok(i < 1000, 'found a key for every master');
      const key = `job-${i}`;
      const port = await cluster.nodeFor(`${prefix}:{${key}}`);
      if (!byPort.has(port)) byPort.set(port, key);
    }
    assert.equal(byPort.size, 3);

    for (const [port, key] of byPort) {
      const lease = `${prefix}:{${key}}`;
      const seen = await within(5000, `execute on ${key}`, lock({ key, store, ttl: '5s' }).execute(async () => ({
        token: getLockToken(),
        owner: await call(port, ['GET', lease]),
        storedToken: await call(port, ['GET', `${lease}:token`]),
      })));
      assert.ok(Number.isSafeInteger(seen.token) && seen.token > 0, `token ${seen.token}`);
      assert.equal(typeof seen.owner, 'string', `the lease lives on its master (port ${port})`);
      assert.equal(seen.storedToken, String(seen.token), 'the token is stored beside the lease');
      assert.equal(await call(port, ['EXISTS', lease]), 0, 'released when the execution settled');
      // and free for the next execution at once (fail fast)
      const again = await lock({ key, store, ttl: '5s' }).execute(() => getLockToken());
      assert.ok(again > seen.token);
    }
  });

  // Grants on a cluster: the queue lives beside the lease on its master, and the grant's
  // message reaches a waiter whose subscriber connection may be on another node.
  test('a release hands the lease to a waiter queued through another cluster client, without a try', async () => {
    const connect = async () => {
      const c = new Redis.Cluster(cluster.nodes, { lazyConnect: true });
      c.on('error', noop);
      clients.push([{ close: (x) => x.disconnect() }, c]);
      await c.connect();
      return c;
    };
    const prefix = 'cluster-grant';
    const r = await handover(KINDS[0], {
      announce: true,
      connect,
      prefix,
      async beforeRelease(key) {
        const queue = `${prefix}:{${key}}:queue`;
        assert.equal(await call(await cluster.nodeFor(queue), ['LLEN', queue]), 1, "B is queued on the lease's master");
      },
    });
    await assertGranted(r);
  });
});

// ---------------------------------------------------------------------------------
// ioredis keyPrefix
// ---------------------------------------------------------------------------------

describe('an ioredis client with a keyPrefix', () => {
  // ioredis prepends `keyPrefix` to the KEYS of EVAL/EVALSHA, so the scripts PUBLISH on
  // and name `app:<prefix>:{k}...`; channels are not prefixed by ioredis, so the store
  // subscribes with the prefix added, and strips it from the lease a grant names.
  const connectPrefixed = async () => {
    const c = new Redis({ host: '127.0.0.1', port: server.port, keyPrefix: 'app:', lazyConnect: true, retryStrategy: () => 50 });
    c.on('error', noop);
    clients.push([KINDS[0], c]);
    await c.connect();
    return c;
  };

  test('keyPrefix: a release wakes a waiter whose next poll is far away', async () => {
    await assertGranted(await handover(KINDS[0], { announce: true, connect: connectPrefixed, prefix: 'kp-handover' }));
  });

  test('keyPrefix: a waiter that gave up leaves the queue: the release frees the key', async () => {
    const key = uniqueKey('kp-gave-up');
    const prefix = 'kp-gave-up';
    const storeA = newStore({ client: await connectPrefixed(), prefix });
    const storeB = newStore({ client: await connectPrefixed(), prefix });
    const storeC = newStore({ client: await connectPrefixed(), prefix });
    const holding = deferred();
    const released = deferred();
    const a = lock({ key, store: storeA, ttl: '30s' }).execute(async () => {
      holding.resolve();
      await released.promise;
      return getLockToken();
    });
    await within(2000, 'A holds the key', holding.promise);
    const b = lock({ key, store: storeB, ttl: '30s', wait: 150 }).execute(() => 'B ran');
    await assert.rejects(within(2000, 'B gives up', b), { code: 'LOCK_NOT_ACQUIRED' });
    assert.equal(await call(server.port, ['LLEN', `app:${prefix}:{${key}}:queue`]), 0, "B's owner left the queue");
    released.resolve();
    await within(2000, 'A settled', a);
    assert.equal(await storeC.isLocked(key), false, 'the key is free once A released it');
  });

  // `prefix: 'kp-shared'` on a client with keyPrefix 'app:' and `prefix: 'app:kp-shared'`
  // on a plain client name the same Redis keys: they are one lock.
  const connectPlain = () => newClient(KINDS[0], server.port);

  test('keyPrefix: a store on it and one on a plain client whose prefix includes it see the same leases', async () => {
    const key = uniqueKey('kp-shared');
    const prefixed = newStore({ client: await connectPrefixed(), prefix: 'kp-shared' });
    const plain = newStore({ client: await connectPlain(), prefix: 'app:kp-shared' });
    const token = (await prefixed.acquire(key, 'p', 5000))?.fencingToken;
    assert.ok(token > 0);
    assert.equal(await call(server.port, ['GET', `app:kp-shared:{${key}}`]), 'p');
    for (const store of [prefixed, plain]) {
      assert.equal(await store.isLocked(key), true);
      const left = await store.ttl(key);
      assert.ok(left > 0 && left <= 5000, `ttl ${left}`);
    }
    assert.equal(await plain.acquire(key, 'n', 5000), undefined, 'held, through either store');
    assert.equal(await plain.renew(key, 'p', 5000), true);
    assert.equal(await plain.release(key, 'p'), true);
    assert.equal(await prefixed.isLocked(key), false);
    assert.equal(await prefixed.ttl(key), undefined);
    assert.ok((await plain.acquire(key, 'n', 5000)).fencingToken > token, 'one token sequence');
    assert.equal(await prefixed.release(key, 'n'), true);
  });

  test('keyPrefix: a release announced through one is heard through the other, both ways', async () => {
    const prefixed = newStore({ client: await connectPrefixed(), prefix: 'kp-shared' });
    const plain = newStore({ client: await connectPlain(), prefix: 'app:kp-shared' });
    for (const [listening, releasing] of [[prefixed, plain], [plain, prefixed]]) {
      const key = uniqueKey('kp-announce');
      const channel = `app:kp-shared:{${key}}:released`;
      const heard = deferred();
      const stop = listening.subscribe(key, () => heard.resolve());
      await waitFor('the channel subscribed', async () => (await call(server.port, ['PUBSUB', 'NUMSUB', channel]))[1] >= 1, { timeoutMs: 2000, intervalMs: 5 });
      assert.ok(await releasing.acquire(key, 'o', 5000));
      assert.equal(await releasing.release(key, 'o'), true);
      await within(2000, 'the release announced', heard.promise);
      stop();
    }
  });

  test('keyPrefix: a release through a plain client hands the lease to a waiter on a prefixed one, and back', async () => {
    // there: plain -> prefixed; back: prefixed -> plain
    await assertGranted(await handover(KINDS[0], { announce: true, connect: connectPlain, prefix: 'app:kp-shared', connectB: connectPrefixed, prefixB: 'kp-shared' }));
    await assertGranted(await handover(KINDS[0], { announce: true, connect: connectPrefixed, prefix: 'kp-shared', connectB: connectPlain, prefixB: 'app:kp-shared' }));
  });
});

describe('a grant whose message overtakes the answer to the try that queued its owner', () => {
  // The engine watches a key (store.subscribe) only once a try has answered "held": a
  // grant that comes before that answer finds no listener. The store keeps it for the
  // try, which answers with it; had it been released as unclaimed, the next owner in the
  // Redis queue would be served before the one queued (and granted) first.

  /**
   * Q holds a key; W is queued first, X behind it; Q releases, handing the lease to W
   * while W's first try is still unanswered: W's client passes every acquire answer
   * through `late` 300 ms after Redis gave it (a slow link, or a busy event loop that
   * reads the subscriber's socket first). Returns the executions and the order in which
   * W and X ran.
   */
  async function grantBeforeAnswer(prefix, late) {
    const key = uniqueKey(prefix);
    const { createHash } = await import('node:crypto');
    const scripts = RedisLockStore[Symbol.for('leasehold.redis.scripts')];
    const acquireSha = createHash('sha1').update(scripts.ACQUIRE).digest('hex');
    const storeQ = newStore({ client: await newClient(KINDS[0], server.port), prefix, handOffAfter: 0 });
    const wClient = await newClient(KINDS[0], server.port);
    const evalsha = wClient.evalsha.bind(wClient);
    wClient.evalsha = async (sha, ...rest) => {
      const reply = await evalsha(sha, ...rest);
      if (sha !== acquireSha) return reply;
      await sleep(300);
      return late(reply);
    };
    const storeW = newStore({ client: wClient, prefix });
    const storeX = newStore({ client: await newClient(KINDS[0], server.port), prefix });
    // Both waiting stores already listen on their grant channels (they waited before).
    storeW.subscribe('warm-up', noop);
    storeX.subscribe('warm-up', noop);
    await waitFor('both grant channels', async () => (await call(server.port, ['PUBSUB', 'CHANNELS', `${prefix}:grants:*`])).length === 2, { timeoutMs: 2000 });
    assert.ok(await storeQ.acquire('warm-up', 'warm', 1000), 'the scripts are cached on the server');

    const holding = deferred();
    const released = deferred();
    const q = lock({ key, store: storeQ, ttl: '30s' }).execute(async () => {
      holding.resolve();
      await released.promise;
    });
    await within(2000, 'Q holds the key', holding.promise);
    const order = [];
    const queue = `${prefix}:{${key}}:queue`;
    const w = lock({ key, store: storeW, ttl: '30s', wait: '10s' }).execute(() => {
      order.push('W');
    });
    await waitFor('W queued in Redis', async () => (await call(server.port, ['LLEN', queue])) === 1, { timeoutMs: 2000, intervalMs: 2 });
    const x = lock({ key, store: storeX, ttl: '30s', wait: '10s' }).execute(() => {
      order.push('X');
    });
    await waitFor('X queued behind W', async () => (await call(server.port, ['LLEN', queue])) === 2, { timeoutMs: 2000, intervalMs: 2 });
    released.resolve();
    await within(2000, 'Q settled', q);
    return { key, storeX, w, x, order };
  }

  test('the owner queued first still runs first when its grant arrives before its try is answered', async () => {
    const { w, x, order } = await grantBeforeAnswer('overtaken', (reply) => reply);
    await within(5000, 'W and X ran', Promise.all([w, x]));
    assert.deepEqual(order, ['W', 'X'], 'served in the order they were queued (W was handed the lease first)');
  });

  test('a grant kept for a try that then fails is released, and passes to the next owner', async () => {
    const { key, storeX, w, x, order } = await grantBeforeAnswer('overtaken-failed', () => {
      throw new Error('the answer was lost');
    });
    await assert.rejects(within(2000, 'W failed', w), { code: 'LOCK_STORE_FAILED' });
    // Kept and never released, W's lease would hold the key for its 30 s ttl.
    await within(2000, 'X ran', x);
    assert.deepEqual(order, ['X']);
    assert.equal(await storeX.isLocked(key), false);
  });
});
