// Local handoff on Redis and PostgreSQL (README, "What happens when"): a lease passed
// between executions of one process with no store call, each holder with a larger
// fencing token; the turn that gives the key back to other processes; the settle
// guarantee; and the token invariant across a Redis restart that lost the data and a
// holder paused (SIGSTOP) past its ttl. Real redis-server and PostgreSQL, started here.
// Run: node --test js-tests/local-handoff.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import pg from 'pg';
import { FakeTimeProvider, ResiliencePipelineBuilder, getLockToken } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { PostgresLockStore } from 'leasehold/postgres';
import { startRedisServer } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';
import { onLines } from './support/lines.mjs';
import { within } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';
import { deferred, flush } from './support/time.mjs';

const WORKER = fileURLToPath(new URL('./support/handoff-worker.mjs', import.meta.url));
const noop = () => {};

let redis;
let postgres;
let pool;
const closers = [];

before(async () => {
  [redis, postgres] = await Promise.all([startRedisServer(), startPostgres()]);
  pool = new pg.Pool({ ...postgres.connectionOptions, max: 6 });
  pool.on('error', noop);
  await new PostgresLockStore({ client: pool, table: 'handoff_locks' }).ensureSchema();
});

after(async () => {
  for (const close of closers.reverse()) await close().catch(noop);
  await pool?.end().catch(noop);
  await Promise.allSettled([redis?.stop(), postgres?.stop()]);
});

function redisClient() {
  const client = new Redis({ host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: 1 });
  client.on('error', noop);
  closers.push(async () => client.disconnect());
  return client;
}

const STORES = {
  redis: {
    make: (options) => new RedisLockStore({ client: redisClient(), prefix: 'handoff', ...options }),
    where: () => String(redis.port),
  },
  postgres: {
    make: (options) => new PostgresLockStore({ client: pool, table: 'handoff_locks', ...options }),
    where: () => postgres.url,
  },
};

/** `store` with its calls counted by method, and those answered. */
function counted(store) {
  const calls = { acquire: 0, renew: 0, release: 0 };
  const answered = { acquire: 0, renew: 0, release: 0 };
  for (const method of Object.keys(calls)) {
    const original = store[method].bind(store);
    store[method] = (...args) => {
      calls[method] += 1;
      const pending = original(...args);
      pending.finally(() => {
        answered[method] += 1;
      }).catch(noop);
      return pending;
    };
  }
  closers.push(() => store.close());
  return { store, calls, answered };
}

/** A process of `handoff-worker.mjs`: its lines as they come, and a way to say "stop". */
function worker(kind, key, ttl, mode) {
  const child = spawn(process.execPath, [WORKER, kind, STORES[kind].where(), key, String(ttl), mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = [];
  const waiters = [];
  onLines(child.stdout, (line) => {
    const message = { ...JSON.parse(line), receivedAt: Date.now() };
    lines.push(message);
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  closers.push(async () => {
    child.kill('SIGKILL');
    await exited;
  });
  const next = (check) =>
    new Promise((resolve) => {
      const look = () => {
        const found = lines.find(check);
        if (found) resolve(found);
        else waiters.push(look);
      };
      look();
    });
  return { child, lines, next, exited, stop: () => child.stdin.write('stop\n') };
}

for (const kind of Object.keys(STORES)) {
  describe(`local handoff on ${kind}`, () => {
    test('waiting executions of one process are handed the lease in turn, each with a larger token', async () => {
      const { store, calls } = counted(STORES[kind].make());
      const key = uniqueKey(`${kind}-loop`);
      const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '10s', wait: '20s' }).build();
      const tokens = [];
      let inside = 0;
      let overlaps = 0;
      const loop = async () => {
        for (let i = 0; i < 40; i += 1) {
          await pipeline.execute(async () => {
            inside += 1;
            if (inside > 1) overlaps += 1;
            tokens.push(getLockToken());
            await null;
            inside -= 1;
          });
        }
      };
      await within(30_000, 'the executions', Promise.all(Array.from({ length: 8 }, loop)));
      assert.equal(overlaps, 0, 'one holder at a time');
      assert.equal(tokens.length, 320);
      for (let i = 1; i < tokens.length; i += 1) {
        assert.ok(tokens[i] > tokens[i - 1], `token ${i} (${tokens[i]}) exceeds the one before (${tokens[i - 1]})`);
      }
      assert.ok(calls.acquire < tokens.length / 2, `most holders were handed the lease here: ${calls.acquire} acquires for ${tokens.length}`);
      // Settled, and nobody here waits: the key is back in the store, whose next grant
      // exceeds every token handed out here.
      const other = await STORES[kind].make().acquire(key, 'another-process', 1000);
      assert.ok(other !== undefined, 'a fail-fast try finds the key free');
      assert.ok(other.fencingToken > tokens.at(-1), `${other.fencingToken} > ${tokens.at(-1)}`);
    });

    test('on a fake clock: a handoff takes no store call, and the turn gives the lease back', async () => {
      const clock = new FakeTimeProvider(1_000);
      const { store, calls } = counted(STORES[kind].make({ handOffAfter: 10 }));
      const key = uniqueKey(`${kind}-turn`);
      const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
        .addLock({ key, store, ttl: '10s', wait: '20s' })
        .build();
      const gates = [0, 1, 2].map(() => deferred());
      const tokens = [];
      const run = (gate) =>
        pipeline.execute(async () => {
          tokens.push(getLockToken());
          await gate.promise;
        });
      const runs = [run(gates[0])];
      await within(5000, 'the first holder', waitUntil(() => tokens.length === 1));
      const acquiresBefore = calls.acquire;
      // Two more wait behind a holder here: they ask the store nothing.
      runs.push(run(gates[1]), run(gates[2]));
      await flush();
      assert.equal(calls.acquire, acquiresBefore, 'waiting here asks the store nothing');
      clock.advance(1); // one millisecond after the grant: up to 1,000 local tokens
      gates[0].resolve();
      await within(5000, 'the second holder', waitUntil(() => tokens.length === 2));
      assert.equal(tokens[1], tokens[0] + 1, 'handed over with the next token');
      assert.equal(calls.release, 0, 'without a release');
      assert.equal(calls.acquire, acquiresBefore, 'nor an acquire');
      clock.advance(10); // the turn is over: the lease goes back to the store
      gates[1].resolve();
      // The waiter here asks once the lease is back: at once on Redis, on the release's
      // announcement (or its next poll, which the clock's steps bring) on PostgreSQL.
      await within(5000, 'the third holder', waitUntil(() => tokens.length === 3, () => clock.advance(50)));
      assert.equal(calls.release, 1, 'released to the store');
      assert.ok(tokens[2] > tokens[1] + 1, `the store granted the third holder its own token: ${tokens}`);
      gates[2].resolve();
      await Promise.all(runs);
    });

    test('with linger, a loop of executions keeps the lease, and gives it back after', async () => {
      const clock = new FakeTimeProvider(1_000);
      const { store, calls, answered } = counted(STORES[kind].make());
      const key = uniqueKey(`${kind}-linger`);
      const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
        .addLock({ key, store, ttl: '10s', linger: 5 })
        .build();
      const tokens = [];
      for (let i = 0; i < 8; i += 1) {
        tokens.push(await pipeline.execute(() => getLockToken()));
        clock.advance(1); // 1 ms between executions, within one turn (10 ms)
      }
      for (let i = 1; i < tokens.length; i += 1) assert.ok(tokens[i] > tokens[i - 1], `${tokens}`);
      assert.equal(calls.acquire, 1, 'one acquire for 8 executions');
      assert.equal(calls.release, 0);
      // Settled: the lease stays here for its linger, then goes back to the store.
      const other = STORES[kind].make();
      closers.push(() => other.close());
      assert.equal(await other.acquire(key, 'meanwhile', 1000), undefined, 'held for the linger');
      clock.advance(5);
      await within(5000, 'the release', waitUntil(() => answered.release === 1));
      const after = await other.acquire(key, 'after', 1000);
      assert.ok(after?.fencingToken > tokens.at(-1), 'free after the linger, with a larger token');
    });

    test('linger is checked: a duration within the store\'s turn', () => {
      const store = STORES[kind].make();
      closers.push(() => store.close());
      const add = (options) => new ResiliencePipelineBuilder().addLock({ key: 'k', store, ...options });
      assert.throws(() => add({ linger: 11 }), { name: 'RangeError', message: /linger must be at most the store's turn \(its handOffAfter, 10 ms\), got 11/ });
      assert.throws(() => add({ linger: -1 }), { name: 'RangeError', message: /linger/ });
      assert.throws(() => add({ linger: 'soon' }), { message: /linger/ });
      assert.throws(() => new ResiliencePipelineBuilder().addLock({ key: 'k', linger: 5 }), {
        name: 'TypeError',
        message: /linger needs a store that hands leases over/,
      });
      add({ linger: '5ms' });
      add({ linger: 0 });
    });

    test('a renew or release that carries a token makes the next grant larger', async () => {
      const store = STORES[kind].make();
      closers.push(() => store.close());
      const key = uniqueKey(`${kind}-floor`);
      const first = await store.acquire(key, 'a', 5000);
      const ahead = first.fencingToken + 1e12;
      assert.equal(await store.renew(key, 'a', 5000, { fencingToken: ahead }), true);
      assert.equal(await store.release(key, 'a', { fencingToken: ahead + 5 }), true);
      const next = await store.acquire(key, 'b', 5000);
      assert.ok(next.fencingToken > ahead + 5, `${next.fencingToken} > ${ahead + 5}`);
      await assert.rejects(store.release(key, 'b', { fencingToken: -1 }), { name: 'TypeError', message: /fencingToken/ });
      await assert.rejects(store.renew(key, 'b', 5000, 'x'), { name: 'TypeError', message: /fencingToken/ });
      assert.equal(store.localHandoff, 10, 'the default turn');
      assert.throws(() => STORES[kind].make({ handOffAfter: -1 }), { name: 'RangeError', message: /handOffAfter/ });
    });

    test('another process waiting for the key gets it within turns, not when this one stops', async () => {
      const { store } = counted(STORES[kind].make());
      const key = uniqueKey(`${kind}-fair`);
      const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '10s', wait: '20s' }).build();
      let running = true;
      const loop = async () => {
        while (running) await pipeline.execute(async () => sleep(1));
      };
      const loops = Array.from({ length: 4 }, loop);
      await sleep(100);
      const other = worker(kind, key, 10_000, 'once');
      // This process wants the key for 12 s; without turns the other would wait for all of it.
      let timer;
      const gaveUp = new Promise((resolve) => {
        timer = setTimeout(resolve, 12_000, 'this process stopped first');
      });
      const done = await Promise.race([other.next((m) => 'token' in m || 'error' in m), gaveUp]);
      clearTimeout(timer);
      running = false;
      await Promise.all(loops);
      assert.equal(typeof done, 'object', done);
      assert.equal(done.error, undefined);
      assert.ok(done.token > 0);
    });

    test('a holder paused past its ttl (SIGSTOP) hid no token larger than the next grant', async () => {
      const key = uniqueKey(`${kind}-paused`);
      const held = worker(kind, key, 500, 'loop');
      await within(30_000, 'local handoffs in the other process', held.next(() => tokensOf(held).length >= 50));
      held.child.kill('SIGSTOP');
      const stoppedAt = Date.now();
      try {
        await sleep(800);
        const store = STORES[kind].make();
        let granted;
        let sentAt;
        while (granted === undefined) {
          sentAt = Date.now();
          granted = await store.acquire(key, 'after-the-pause', 5000);
          if (granted === undefined) await sleep(20);
        }
        const before = tokensOf(held).filter((m) => m.at < sentAt);
        assert.ok(before.length >= 50, `${before.length} tokens before the grant`);
        const highest = Math.max(...before.map((m) => m.token));
        assert.ok(granted.fencingToken > highest, `${granted.fencingToken} > ${highest} (stopped at ${stoppedAt})`);
        await store.release(key, 'after-the-pause');
      } finally {
        held.child.kill('SIGCONT');
      }
      held.stop();
      await within(30_000, 'the paused process to stop', held.exited);
    });
  });
}

describe('local handoff on redis across a restart that lost the data', () => {
  test('the first grant after the restart exceeds every token handed out before it', async () => {
    const key = uniqueKey('restart');
    const held = worker('redis', key, 5000, 'loop');
    await within(30_000, 'local handoffs in the other process', held.next(() => tokensOf(held).length >= 50));
    await redis.restart();
    const store = STORES.redis.make();
    let granted;
    let sentAt;
    await within(
      10_000,
      'a grant after the restart',
      (async () => {
        while (granted === undefined) {
          sentAt = Date.now();
          granted = await store.acquire(key, 'after-the-restart', 5000).catch(() => undefined);
          if (granted === undefined) await sleep(5);
        }
      })(),
    );
    const before = tokensOf(held).filter((m) => m.at < sentAt);
    assert.ok(before.length >= 50, `${before.length} tokens before the grant`);
    const highest = Math.max(...before.map((m) => m.token));
    assert.ok(granted.fencingToken > highest, `${granted.fencingToken} > ${highest}`);
    await store.release(key, 'after-the-restart');
    held.stop();
    await within(30_000, 'the other process to stop', held.exited);
  });
});

/** The {token, at} lines of a worker so far. */
const tokensOf = (w) => w.lines.filter((m) => m.token !== undefined);

/** Resolves once `check()` holds, looking after each turn of the event loop (and `step`). */
async function waitUntil(check, step = noop) {
  while (!check()) {
    await flush();
    await sleep(1);
    if (!check()) step();
  }
}
