// A manual lease (`acquireLock`) that receives its key by local handoff runs on a store
// lease of its own ttl (issue 33): not the previous holder's, shorter (another process
// would take a key the engine says is held) or longer (a short lease never released
// would hold the key for the long one). Redis and PostgreSQL (real servers, started
// here) and a custom store with `localHandoff` on a fake clock; handed over by a
// release, and picked up from a `linger`ed lease.
// Run: node --test js-tests/handover-ttl.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import pg from 'pg';
import { FakeTimeProvider, ResiliencePipelineBuilder, acquireLock } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { PostgresLockStore } from 'leasehold/postgres';
import { startRedisServer } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';
import { pollUntil } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';
import { flush } from './support/time.mjs';
import { handoffStore } from './support/handoff-store.mjs';

const noop = () => {};
const TURN = 2_000;
let redis;
let postgres;
let pool;
const closers = [];

before(async () => {
  [redis, postgres] = await Promise.all([startRedisServer(), startPostgres()]);
  pool = new pg.Pool({ ...postgres.connectionOptions, max: 6 });
  pool.on('error', noop);
  await new PostgresLockStore({ client: pool, table: 'ttl_locks' }).ensureSchema();
});

after(async () => {
  for (const close of closers.reverse()) await close().catch(noop);
  await pool?.end().catch(noop);
  await Promise.allSettled([redis?.stop(), postgres?.stop()]);
});

function redisStore() {
  const client = new Redis({ host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: 1 });
  client.on('error', noop);
  // A turn long enough that every handover below is local, however loaded the machine.
  const store = new RedisLockStore({ client, prefix: 'ttl', handOffAfter: TURN });
  closers.push(async () => {
    await store.close();
    client.disconnect();
  });
  return store;
}

function postgresStore() {
  const store = new PostgresLockStore({ client: pool, table: 'ttl_locks', handOffAfter: TURN });
  closers.push(() => store.close());
  return store;
}

const STORES = { redis: redisStore, postgres: postgresStore };

// One store object per backend stands for another process (the polls below would
// otherwise open a Redis connection each).
const others = new Map();

/** Whether another process (a second store object, its own owner) can take `key` now. */
async function othersCanTake(make, key) {
  if (!others.has(make)) others.set(make, make());
  const lease = await others.get(make).acquire(key, `other-${Math.random()}`, 1_000);
  return lease !== undefined;
}

for (const [name, make] of Object.entries(STORES)) {
  describe(`on ${name}`, () => {
    test('a short lease handed to a long acquireLock: others find the key held for the long one', async () => {
      const store = make();
      const key = uniqueKey(`${name}-short-long`);
      const a = await acquireLock(store, key, 300);
      const bPromise = acquireLock(store, key, 5_000, { wait: 1_000 });
      await sleep(5); // b waits behind a, here
      assert.equal(await a.release(), true);
      const b = await bPromise;
      assert.ok(b, 'handed over');
      assert.ok(b.fencingToken > a.fencingToken);
      await sleep(400); // past a's 300 ms
      assert.equal(await othersCanTake(make, key), false, "the store keeps b's own 5 s lease");
      assert.equal(b.signal.aborted, false);
      assert.equal(await b.release(), true, 'b still held it');
      assert.equal(await othersCanTake(make, key), true, 'free once released');
    });

    test('a long lease handed to a short acquireLock never released: the key frees at the short end', async () => {
      const store = make();
      const key = uniqueKey(`${name}-long-short`);
      const a = await acquireLock(store, key, 3_000);
      const bPromise = acquireLock(store, key, 20, { wait: 1_000 });
      await sleep(5);
      const released = Date.now();
      await a.release();
      assert.ok(await bPromise, 'handed over');
      // Never released: free about 20 ms later, long before a's 3 s.
      await pollUntil('the key to free', () => othersCanTake(make, key), { timeoutMs: 2_500, intervalMs: 20 });
      assert.ok(Date.now() - released < 2_500);
    });

    test("a lingering lease picked up by acquireLock holds for the lease's own ttl", async () => {
      const store = make();
      const key = uniqueKey(`${name}-linger`);
      const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: 300, linger: 10 }).build();
      await pipeline.execute(() => {});
      const b = await acquireLock(store, key, 5_000); // within the linger: no store call
      assert.ok(b);
      await sleep(400);
      assert.equal(await othersCanTake(make, key), false, 'held for 5 s, not 300 ms');
      assert.equal(await b.release(), true);
    });
  });
}

describe('on a custom store with localHandoff (fake clock)', () => {
  async function handedOver(firstTtl, secondTtl) {
    const clock = new FakeTimeProvider();
    clock.advance(1_000);
    const store = handoffStore(clock, { turn: 50 });
    const a = await acquireLock(store, 'k', firstTtl, { timeProvider: clock });
    const bPromise = acquireLock(store, 'k', secondTtl, { wait: 1_000, timeProvider: clock });
    await flush();
    clock.advance(1); // one token per microsecond since the grant
    await a.release();
    const b = await bPromise;
    assert.ok(b);
    assert.equal(b.fencingToken, a.fencingToken + 1);
    await flush();
    return { clock, store, b };
  }

  test('30 ms handed to 5 s: held for 5 s, in the store too', async () => {
    const { clock, store, b } = await handedOver(30, 5_000);
    for (let i = 0; i < 10; i++) {
      clock.advance(10);
      await flush();
    }
    assert.equal(await store.acquire('k', 'other', 1_000), undefined, 'the store keeps it for b');
    assert.equal(b.signal.aborted, false);
    assert.equal(await b.release(), true);
  });

  test('3 s handed to 20 ms, never released: free after 20 ms, not 3 s', async () => {
    const { clock, store } = await handedOver(3_000, 20);
    clock.advance(19);
    await flush();
    assert.equal(await store.acquire('k', 'other', 1_000), undefined, 'held to its own end');
    clock.advance(2);
    await flush();
    assert.ok(await store.acquire('k', 'other', 1_000), 'over at its own end');
  });
});
