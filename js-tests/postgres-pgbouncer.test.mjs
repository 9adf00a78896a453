// PostgresLockStore behind PgBouncer in transaction pooling mode (real servers on
// loopback, support/pgbouncer.mjs): every statement through the pooler, where no
// session state survives a transaction; wake-ups through a direct connection for
// LISTEN (`listenClient`), measured; and, with only the pooler reachable, waiters that
// poll, said once as a process warning.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { FakeTimeProvider, getLockToken, LockNotAcquiredError, ResiliencePipelineBuilder } from 'leasehold';
import { PostgresLockStore } from 'leasehold/postgres';
import { within } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';
import { startPgBouncer } from './support/pgbouncer.mjs';
import { startPostgres } from './support/postgres.mjs';

const noop = () => {};

describe('PostgresLockStore through PgBouncer (transaction pooling)', { timeout: 60_000 }, () => {
  let server;
  let bouncer;
  let pooled; // a Pool whose connections go through the pooler
  let direct; // a Client straight to PostgreSQL, for LISTEN
  const stores = [];
  const newStore = (options) => {
    const store = new PostgresLockStore({ client: pooled, transactionPooling: true, ...options });
    stores.push(store);
    return store;
  };

  before(async () => {
    server = await startPostgres();
    bouncer = await startPgBouncer(server, { poolMode: 'transaction', poolSize: 2 });
    pooled = new pg.Pool({ ...bouncer.connectionOptions, max: 6 });
    pooled.on('error', noop);
    direct = new pg.Client(server.connectionOptions);
    direct.on('error', noop);
    await direct.connect();
    await newStore().ensureSchema();
  });
  after(async () => {
    for (const store of stores) await store.close();
    await direct?.end().catch(noop);
    await pooled?.end().catch(noop);
    await bouncer?.stop();
    await server?.stop();
  });

  test('the option is checked', () => {
    assert.throws(() => new PostgresLockStore({ client: pooled, transactionPooling: 'yes' }), {
      name: 'TypeError',
      message: /transactionPooling must be a boolean/,
    });
  });

  test('acquire, held, renew and release by the owner only; tokens rise', async () => {
    const store = newStore();
    const key = uniqueKey('pooled');
    const first = await store.acquire(key, 'a', 5000);
    assert.ok(first.fencingToken > 0);
    assert.equal(await store.acquire(key, 'b', 5000), undefined, 'held');
    assert.equal(await store.acquire(key, 'a', 5000), undefined, 'not reentrant');
    assert.equal(await store.renew(key, 'b', 5000), false);
    assert.equal(await store.renew(key, 'a', 5000), true);
    assert.equal(await store.release(key, 'b'), false);
    assert.equal(await store.release(key, 'a'), true);
    const second = await store.acquire(key, 'b', 5000);
    assert.ok(second.fencingToken > first.fencingToken);
    assert.equal(await store.isLocked(key), true);
    assert.ok((await store.ttl(key)) > 0);
    await store.release(key, 'b');
  });

  test('owners racing for a free key through the pooler: exactly one wins, every time', async () => {
    const store = newStore();
    for (let round = 0; round < 15; round++) {
      const key = uniqueKey('race');
      const answers = await Promise.all(['a', 'b', 'c', 'd'].map((o) => store.acquire(key, o, 5000)));
      assert.equal(answers.filter(Boolean).length, 1);
    }
  });

  test('through the engine: one holder at a time, the token in the callback, fail fast while held', async () => {
    const store = newStore({ listenClient: direct });
    const key = uniqueKey('engine');
    const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '10s' }).build();
    let inside = 0;
    const tokens = [];
    await Promise.all(Array.from({ length: 6 }, () => pipeline.execute(async () => {
      inside += 1;
      assert.equal(inside, 1, 'one holder at a time');
      tokens.push(getLockToken());
      await new Promise((r) => setTimeout(r, 5));
      inside -= 1;
    })));
    assert.deepEqual([...tokens].sort((a, b) => a - b), tokens, 'tokens rise in holding order');
    await store.acquire(key, 'someone', 5000);
    const failFast = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s' }).build();
    await assert.rejects(failFast.execute(noop), LockNotAcquiredError);
    await store.release(key, 'someone');
  });

  test('wake-up through LISTEN on a direct connection: the waiter runs on the NOTIFY, not on a poll', async () => {
    const store = newStore({ listenClient: direct });
    assert.equal(store.canSubscribe, true);
    const key = uniqueKey('wake');
    // Fake time: the engine's polls happen only when the test advances it, and it never does.
    const clock = new FakeTimeProvider();
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key, store, ttl: '30s', wait: '60s' }).build();
    await store.acquire(key, 'holder', 30_000);
    let ranAt;
    const waiter = pipeline.execute(() => {
      ranAt = performance.now();
    });
    // the waiter tried, found the key held, and LISTENs
    await within(10_000, 'the LISTEN', (async () => {
      for (;;) {
        const { rows } = await direct.query('SELECT pg_listening_channels() AS c');
        if (rows.length > 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    })());
    const releasedAt = performance.now();
    await store.release(key, 'holder');
    await within(10_000, 'the waiter woken by NOTIFY', waiter);
    const latency = ranAt - releasedAt;
    console.log(`# wake-up latency through LISTEN direct, statements through PgBouncer: ${latency.toFixed(1)} ms`);
    assert.ok(latency >= 0);
  });

  test('only the pooler reachable: waiters poll, and the store says so once', async () => {
    const store = newStore(); // no listenClient: nothing to LISTEN on but the pooler
    assert.equal(store.canSubscribe, false, 'never LISTENs through the pooler');
    const warnings = [];
    const onWarning = (w) => {
      if (w.code === 'LEASEHOLD_POLLING') warnings.push(w);
    };
    process.on('warning', onWarning);
    try {
      const key = uniqueKey('poll');
      const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '10s' }).build();
      await store.acquire(key, 'holder', 5000);
      const waiters = [pipeline.execute(() => 'first'), pipeline.execute(() => 'second')];
      setTimeout(() => store.release(key, 'holder'), 100);
      assert.deepEqual(await within(15_000, 'the polling waiters', Promise.all(waiters)), ['first', 'second']);
      // warnings are emitted on the next tick
      await new Promise((r) => setImmediate(r));
      assert.equal(warnings.length, 1, 'said once');
      assert.equal(warnings[0].name, 'LeaseholdWarning');
      assert.match(warnings[0].message, /cannot LISTEN .* waiters poll .* listenClient/);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
