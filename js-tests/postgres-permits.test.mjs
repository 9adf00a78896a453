// Permits on PostgresLockStore (issue #28) against a real PostgreSQL (support/postgres.mjs):
// limits with weights summed, readers together and a writer alone, the row's queue (a
// heavy or exclusive waiter not overtaken; a try that will not wait holding nobody up),
// the key's one limit both ways, renew and release per owner, lapsed permits returning,
// one token counter, bad options, inspect, a table made before permits, and through the
// engine: processes never more than the limit inside, a SIGKILLed holder's permits going
// to the next waiter, its late fenced write refused. Nothing is mocked; waits are bounded.
// Run: node --test js-tests/postgres-permits.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PostgresLockStore } from 'leasehold/postgres';
import { LockLimitMismatchError, acquireLock, engine, withLock } from './support/leasehold.mjs';
import { startPostgres, waitFor } from './support/postgres.mjs';
import { noUnhandledRejections, within } from './support/async.mjs';
import { FLEET_DONE_MS, FLEET_READY_MS, startFleetWorker } from './support/fleet.mjs';
import { uniqueKey } from './support/keys.mjs';
import { startPgBouncer } from './support/pgbouncer.mjs';

noUnhandledRejections(before, after);

const SHARED = 2147483647;
const TTL = 10_000;
const noop = () => {};

let server;
let pool;
let store;

before(async () => {
  server = await startPostgres();
  pool = new pg.Pool({ ...server.connectionOptions, max: 8 });
  pool.on('error', noop);
  store = new PostgresLockStore({ client: pool });
  await store.ensureSchema();
});

after(async () => {
  await store?.close();
  await pool?.end();
  await server?.stop();
});

const permits = (limit, weight) => ({ limit, weight });
const token = (answer) => answer?.fencingToken;

/** Tries until granted (a waiter's second try confirms its place in the row's queue). */
async function granted(key, owner, options, what = `${owner} granted`) {
  let answer;
  await waitFor(what, async () => {
    answer = await store.acquire(key, owner, TTL, options);
    return answer !== undefined;
  });
  return answer;
}

test(`the engine in use is the one asked for (${engine})`, () => {
  if (process.env.LEASEHOLD_ENGINE) assert.equal(engine, process.env.LEASEHOLD_ENGINE);
  assert.equal(store.permits, true);
});

test('a limit holds with weights summed; freed permits go to a request that fits', async () => {
  const key = uniqueKey('pg limit');
  const a = await store.acquire(key, 'a', TTL, permits(5, 2));
  const b = await store.acquire(key, 'b', TTL, permits(5, 2));
  assert.ok(token(a) > 0 && token(b) > token(a));
  assert.equal(await store.acquire(key, 'c', TTL, permits(5, 2)), undefined, '2 + 2 + 2 > 5');
  const d = await store.acquire(key, 'd', TTL, permits(5, 1));
  assert.ok(token(d) > token(b), '2 + 2 + 1 fits: c has tried once and holds nobody up');
  assert.equal(await store.acquire(key, 'e', TTL, permits(5, 1)), undefined, 'full');
  assert.equal(await store.release(key, 'a'), true);
  const c = await store.acquire(key, 'c', TTL, permits(5, 2));
  assert.ok(token(c) > token(d));
  const inspection = await store.inspect(key);
  assert.deepEqual(
    inspection.holders.map((h) => [h.owner, h.weight]),
    [['b', 2], ['d', 1], ['c', 2]],
  );
  assert.equal(inspection.limit, 5);
});

test('a burst of concurrent acquires never grants more than the limit', async () => {
  const key = uniqueKey('pg burst');
  const owners = Array.from({ length: 24 }, (_, i) => ({ owner: `o${i}`, weight: 1 + (i % 3) }));
  const answers = await Promise.all(owners.map(({ owner, weight }) => store.acquire(key, owner, TTL, permits(7, weight))));
  const weights = owners.filter((_, i) => answers[i] !== undefined).map((o) => o.weight);
  const sum = weights.reduce((x, y) => x + y, 0);
  assert.ok(sum <= 7 && sum >= 5, `granted weights ${weights} sum to ${sum}`);
  const inspection = await store.inspect(key);
  assert.equal(inspection.holders.reduce((x, h) => x + h.weight, 0), sum);
});

test('readers run together, a writer alone, and a waiting writer is not overtaken', async () => {
  const key = uniqueKey('pg modes');
  const reader = permits(SHARED, 1);
  const writer = permits(SHARED, SHARED);
  assert.ok(token(await store.acquire(key, 'r1', TTL, reader)));
  assert.ok(token(await store.acquire(key, 'r2', TTL, reader)));
  assert.equal(await store.acquire(key, 'w', TTL, writer), undefined);
  assert.equal(await store.acquire(key, 'w', TTL, writer), undefined, 'refused again: w waits');
  assert.equal(await store.acquire(key, 'r3', TTL, reader), undefined, 'a later reader waits behind the writer');
  const shown = await store.inspect(key);
  assert.deepEqual(
    shown.holders.map((h) => [h.owner, h.mode, h.weight]),
    [['r1', 'shared', 1], ['r2', 'shared', 1]],
  );
  assert.deepEqual(shown.waiters.map((w) => w.owner), ['w'], 'the waiter whose place is kept');
  assert.equal(shown.limit, SHARED);
  await store.release(key, 'r1');
  assert.equal(await store.acquire(key, 'w', TTL, writer), undefined, 'r2 still reads');
  await store.release(key, 'r2');
  const w = await store.acquire(key, 'w', TTL, writer);
  assert.ok(token(w));
  assert.deepEqual((await store.inspect(key)).holders.map((h) => [h.owner, h.mode]), [['w', 'exclusive']]);
  assert.equal(await store.acquire(key, 'r3', TTL, reader), undefined, 'the writer is alone');
  assert.equal(await store.release(key, 'w'), true);
  assert.ok(token(await store.acquire(key, 'r3', TTL, reader)) > token(w));
});

test('FIFO: a heavy request at the head is not overtaken by a light one that would fit', async () => {
  const key = uniqueKey('pg fifo');
  await store.acquire(key, 'a', TTL, permits(3, 1));
  assert.equal(await store.acquire(key, 'heavy', TTL, permits(3, 3)), undefined);
  assert.equal(await store.acquire(key, 'heavy', TTL, permits(3, 3)), undefined);
  assert.equal(await store.acquire(key, 'light', TTL, permits(3, 1)), undefined, '1 + 1 fits, but heavy is ahead');
  assert.equal(await store.acquire(key, 'light', TTL, permits(3, 1)), undefined);
  assert.deepEqual((await store.inspect(key)).waiters.map((w) => w.owner), ['heavy', 'light']);
  await store.release(key, 'a');
  assert.equal(await store.acquire(key, 'light', TTL, permits(3, 1)), undefined, 'still behind heavy');
  const heavy = await store.acquire(key, 'heavy', TTL, permits(3, 3));
  assert.ok(token(heavy));
  await store.release(key, 'heavy');
  assert.ok(token(await store.acquire(key, 'light', TTL, permits(3, 1))) > token(heavy));
  assert.deepEqual((await store.inspect(key)).waiters, []);
});

test('a waiter ahead that fits does not hold up one behind it that fits too', async () => {
  const key = uniqueKey('pg fits');
  await store.acquire(key, 'a', TTL, permits(4, 2));
  await store.acquire(key, 'b', TTL, permits(4, 2));
  for (const owner of ['x', 'x', 'y', 'y']) assert.equal(await store.acquire(key, owner, TTL, permits(4, 1)), undefined);
  await store.release(key, 'a');
  assert.ok(token(await store.acquire(key, 'y', TTL, permits(4, 1))), 'x keeps its permit reserved; y fits beside it');
  assert.ok(token(await store.acquire(key, 'x', TTL, permits(4, 1))));
});

test("a waiter's place lapses without tries, and its release takes it out", async () => {
  const key = uniqueKey('pg lapse place');
  await store.acquire(key, 'a', TTL, permits(2, 1));
  for (const owner of ['gone', 'gone', 'left', 'left']) assert.equal(await store.acquire(key, owner, TTL, permits(2, 2)), undefined);
  assert.equal(await store.acquire(key, 'c', TTL, permits(2, 1)), undefined, 'behind two heavy waiters');
  assert.equal(await store.release(key, 'left'), false, 'a waiter held nothing');
  // `gone` stopped trying: its place lapses (QUEUE_LAPSE_MS after its last try; moved back here).
  await pool.query(`UPDATE leasehold_locks SET permits = jsonb_set(permits, '{q,gone,e}', '0') WHERE key = $1`, [key]);
  assert.ok(token(await store.acquire(key, 'c', TTL, permits(2, 1))), 'nobody is ahead any more');
  assert.deepEqual((await store.inspect(key)).waiters, []);
});

test('the key has one limit: plain vs permits both ways, 3 vs 4, and while only waiters pin it', async () => {
  const key = uniqueKey('pg agree');
  await store.acquire(key, 'a', TTL, permits(3, 1));
  assert.deepEqual(await store.acquire(key, 'p', TTL), { limit: 3 }, 'a plain acquire on a key held with permits');
  assert.deepEqual(await store.acquire(key, 'b', TTL, permits(4, 1)), { limit: 3 });
  assert.deepEqual(await store.acquire(key, 'w', TTL, permits(SHARED, 1)), { limit: 3 });
  assert.equal((await store.inspect(key)).waiters.length, 0, 'a refused limit is not queued');

  const plain = uniqueKey('pg agree plain');
  assert.ok(token(await store.acquire(plain, 'p', TTL)));
  assert.deepEqual(await store.acquire(plain, 'a', TTL, permits(3, 1)), { limit: 1 }, 'permits on a key with a plain lease');
  assert.equal(await store.renew(plain, 'p', TTL), true, 'the plain lease is untouched');
  assert.equal(await store.release(plain, 'p'), true);
  assert.ok(token(await store.acquire(plain, 'a', TTL, permits(3, 1))), 'free: any limit');
  await store.release(plain, 'a');
  assert.ok(token(await store.acquire(plain, 'p2', TTL)), 'released: plain again');
  await store.release(plain, 'p2');

  // Holders gone, a confirmed waiter left: the key keeps its limit until the waiter is in.
  const waited = uniqueKey('pg agree waited');
  await store.acquire(waited, 'a', TTL, permits(2, 2));
  for (let i = 0; i < 2; i++) assert.equal(await store.acquire(waited, 'w', TTL, permits(2, 2)), undefined);
  await store.release(waited, 'a');
  assert.deepEqual(await store.acquire(waited, 'p', TTL), { limit: 2 });
  assert.deepEqual(await store.acquire(waited, 'x', TTL, permits(5, 1)), { limit: 2 });
  assert.ok(token(await store.acquire(waited, 'w', TTL, permits(2, 2))));
});

test('renew and release act on their own permit only', async () => {
  const key = uniqueKey('pg per owner');
  await store.acquire(key, 'a', TTL, permits(3, 1));
  await store.acquire(key, 'b', TTL, permits(3, 2));
  assert.equal(await store.renew(key, 'a', 60_000), true);
  assert.equal(await store.renew(key, 'x', TTL), false, 'not a holder');
  const ttls = Object.fromEntries((await store.inspect(key)).holders.map((h) => [h.owner, h.ttl]));
  assert.ok(ttls.a > TTL && ttls.b <= TTL, `a renewed to a minute, b not: ${JSON.stringify(ttls)}`);
  assert.ok((await store.ttl(key)) > TTL, 'the key lasts as long as its last holder');
  assert.equal(await store.release(key, 'a'), true);
  assert.equal(await store.release(key, 'a'), false, 'released once');
  assert.equal(await store.renew(key, 'a', TTL), false);
  assert.equal(await store.renew(key, 'b', TTL), true, 'b keeps its permits');
  assert.deepEqual((await store.inspect(key)).holders.map((h) => h.owner), ['b']);
  assert.ok((await store.ttl(key)) <= TTL, 'the key now lasts as long as b');
  assert.equal(await store.release(key, 'b'), true);
  assert.equal(await store.isLocked(key), false);
  assert.equal(await store.inspect(key), undefined);
});

test("a lapsed holder's permits return; the others keep theirs", async () => {
  const key = uniqueKey('pg lapsed');
  await store.acquire(key, 'short', 300, permits(3, 2));
  const long = await store.acquire(key, 'long', TTL, permits(3, 1));
  assert.equal(await store.acquire(key, 'next', TTL, permits(3, 2)), undefined);
  const next = await granted(key, 'next', permits(3, 2), "short's permits returned");
  assert.ok(token(next) > token(long));
  assert.equal(await store.renew(key, 'short', TTL), false, 'lapsed');
  assert.equal(await store.release(key, 'short'), false);
  assert.equal(await store.renew(key, 'long', TTL), true);
});

test('one token counter on the key, rising across plain leases, weights and modes', async () => {
  const key = uniqueKey('pg tokens');
  const tokens = [];
  const take = async (owner, options) => {
    const answer = await store.acquire(key, owner, TTL, options);
    tokens.push(token(answer));
    return store.release(key, owner);
  };
  await take('p1');
  await store.acquire(key, 'h1', TTL, permits(3, 1)).then((a) => tokens.push(token(a)));
  await store.acquire(key, 'h2', TTL, permits(3, 2)).then((a) => tokens.push(token(a)));
  await store.release(key, 'h1');
  await store.release(key, 'h2');
  await take('p2');
  await take('r1', permits(SHARED, 1));
  await take('w1', permits(SHARED, SHARED));
  await take('p3');
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens rise: ${tokens}`);
  // A pruned row starts again above every token it gave (the database's µs clock).
  await store.prune(0);
  const again = await store.acquire(key, 'after', TTL, permits(3, 1));
  assert.ok(token(again) > tokens.at(-1));
});

test('bad options are refused with an error naming them', async () => {
  const key = uniqueKey('pg bad');
  await assert.rejects(store.acquire(key, 'o', TTL, { limit: 0, weight: 1 }), { name: 'RangeError', message: /limit/ });
  await assert.rejects(store.acquire(key, 'o', TTL, { limit: 3, weight: 4 }), { name: 'RangeError', message: /weight/ });
  await assert.rejects(store.acquire(key, 'o', TTL, { limit: 3 }), { name: 'RangeError', message: /weight/ });
  await assert.rejects(store.acquire(key, 'o', TTL, { limit: 2.5, weight: 1 }), { name: 'RangeError', message: /limit/ });
  await assert.rejects(store.acquire(key, 'o', TTL, { limit: 2 ** 31, weight: 1 }), { name: 'RangeError', message: /limit/ });
  await assert.rejects(store.acquire(key, 'o', TTL, { queue: 'yes' }), TypeError);
  await assert.rejects(store.acquire(key, 'o', TTL, null), TypeError);
  assert.equal(await store.isLocked(key), false, 'nothing was taken');
});

test('a release of permits is announced to waiters (NOTIFY)', async () => {
  const key = uniqueKey('pg notify');
  await store.acquire(key, 'a', TTL, permits(2, 2));
  let told;
  const heard = new Promise((resolve) => {
    told = resolve;
  });
  const unsubscribe = store.subscribe(key, () => told());
  try {
    // The LISTEN takes effect a round trip later: release again until heard (bounded).
    await waitFor('the release announced', async () => {
      await store.release(key, 'a');
      await store.acquire(key, 'a', TTL, permits(2, 2));
      return Promise.race([heard.then(() => true), new Promise((r) => setTimeout(r, 50, false))]);
    });
  } finally {
    unsubscribe();
  }
});

test('ensureSchema adds the permits column to a table made before it, from many callers at once', async () => {
  const table = `old_${process.pid}`;
  await pool.query(`CREATE TABLE ${table} (key_digest bytea PRIMARY KEY, key text NOT NULL, owner text, expires_at timestamptz NOT NULL, token bigint NOT NULL)`);
  const old = new PostgresLockStore({ client: pool, table });
  await pool.query(
    `INSERT INTO ${table} VALUES (sha256(convert_to('k', 'UTF8')), 'k', 'o', clock_timestamp() + interval '1 minute', 7)`,
  );
  await Promise.all([old.ensureSchema(), old.ensureSchema(), new PostgresLockStore({ client: pool, table }).ensureSchema()]);
  await old.ensureSchema();
  assert.equal(await old.renew('k', 'o', TTL), true, 'the lease made before is kept');
  assert.deepEqual(await old.acquire('k', 'x', TTL, permits(2, 1)), { limit: 1 });
  assert.equal(await old.release('k', 'o'), true);
  assert.ok(token(await old.acquire('k', 'x', TTL, permits(2, 1))) > 7);
  await old.close();
});

test('ensureSchema that may not add the column says which statement to run', async () => {
  const table = `owned_${process.pid}`;
  const role = `app_${process.pid}`;
  await pool.query(`CREATE TABLE ${table} (key_digest bytea PRIMARY KEY, key text NOT NULL, owner text, expires_at timestamptz NOT NULL, token bigint NOT NULL)`);
  await pool.query(`CREATE ROLE ${role} LOGIN`);
  // It may create tables (ensureSchema's CREATE TABLE IF NOT EXISTS needs that), but this one is not its own.
  await pool.query(`GRANT CREATE ON SCHEMA public TO ${role}; GRANT SELECT, INSERT, UPDATE, DELETE ON ${table} TO ${role}`);
  const client = new pg.Client({ ...server.connectionOptions, user: role });
  client.on('error', noop);
  await client.connect();
  try {
    const app = new PostgresLockStore({ client, table });
    await assert.rejects(app.ensureSchema(), (err) => {
      assert.match(err.message, new RegExp(`ALTER TABLE "${table}" ADD COLUMN permits jsonb`));
      assert.equal(err.cause?.code, '42501', 'the database refused it: not the owner');
      return true;
    });
  } finally {
    await client.end();
  }
});

// ---------------------------------------------------------------------------------
// through the engine, across processes
// ---------------------------------------------------------------------------------

const WORKER = fileURLToPath(new URL('./support/postgres-permits-worker.mjs', import.meta.url));

describe('through the engine', () => {
  test('addLock with mode and limit on this store; a mismatch is a LockLimitMismatchError', async () => {
    const key = uniqueKey('pg engine');
    const reader = await acquireLock(store, key, TTL, { mode: 'shared' });
    const other = await acquireLock(store, key, TTL, { mode: 'shared' });
    assert.ok(other.fencingToken > reader.fencingToken);
    await assert.rejects(
      withLock({ key, store, ttl: TTL, wait: 5_000, limit: 3 }, noop),
      (error) => error instanceof LockLimitMismatchError && error.heldWith === SHARED && error.limit === 3,
    );
    const writer = withLock({ key, store, ttl: TTL, wait: 20_000, mode: 'exclusive' }, async () => (await store.inspect(key)).holders);
    await waitFor('the writer waits in the row', async () => (await store.inspect(key)).waiters.length === 1);
    await reader.release();
    await other.release();
    const holders = await writer;
    assert.deepEqual(holders.map((h) => h.mode), ['exclusive']);
  });

  test('processes with limit 3 (weights 1 and 2) never have more than 3 inside', async (t) => {
    const key = uniqueKey('pg fleet');
    await pool.query('CREATE TABLE IF NOT EXISTS inside (key text PRIMARY KEY, now int NOT NULL, peak int NOT NULL, runs int NOT NULL)');
    await pool.query('INSERT INTO inside VALUES ($1, 0, 0, 0)', [key]);
    const workers = [1, 2, 1, 2].map((weight, i) =>
      startFleetWorker(WORKER, [server.url, 'run', key, String(weight), '3', '8'], `run ${i}`),
    );
    try {
      await within(FLEET_READY_MS, 'every worker connected', Promise.all(workers.map((w) => w.ready)));
      const started = performance.now();
      for (const w of workers) w.go();
      const results = await within(FLEET_DONE_MS, 'the fleet finished', Promise.all(workers.map((w) => w.result)));
      t.diagnostic(`fleet wall time ${Math.round(performance.now() - started)} ms for ${4 * 2 * 8} executions`);
      for (const r of results) assert.deepEqual(r.errors, []);
      const { rows } = await pool.query('SELECT now, peak, runs FROM inside WHERE key = $1', [key]);
      assert.equal(rows[0].now, 0);
      assert.equal(rows[0].runs, 4 * 2 * 8);
      assert.ok(rows[0].peak <= 3, `peak ${rows[0].peak}: never more than the limit inside`);
      const tokens = results.flatMap((r) => r.tokens);
      assert.equal(new Set(tokens).size, tokens.length, 'every grant its own token');
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
    }
  });

  test("a SIGKILLed holder's permits go to the next waiter after its ttl; its late write is refused", async () => {
    const key = uniqueKey('pg killed');
    await pool.query('CREATE TABLE IF NOT EXISTS fenced (key text PRIMARY KEY, token bigint NOT NULL)');
    await pool.query('INSERT INTO fenced VALUES ($1, 0)', [key]);
    const write = async (t) => (await pool.query('UPDATE fenced SET token = $2 WHERE key = $1 AND token < $2', [key, t])).rowCount === 1;
    const holder = startFleetWorker(WORKER, [server.url, 'hold', key, '2', '3', '1000'], 'holder');
    holder.result.catch(noop); // it is killed holding: it never reports
    try {
      const { token: dead } = await within(FLEET_READY_MS, 'the holder holds', holder.ready);
      const alive = await acquireLock(store, key, TTL, { limit: 3 });
      holder.child.kill('SIGKILL');
      await holder.exited;
      const next = await withLock({ key, store, ttl: TTL, wait: 30_000, limit: 3, weight: 2 }, async (_signal) => {
        const inspection = await store.inspect(key);
        return { holders: inspection.holders.map((h) => h.owner), tokens: inspection.holders.map((h) => h.fencingToken) };
      });
      assert.equal(next.holders.length, 2, 'the live holder and the next one');
      assert.ok(next.holders.includes(alive.owner), 'the live holder kept its permit');
      const nextToken = Math.max(...next.tokens);
      assert.ok(nextToken > dead);
      assert.equal(await write(nextToken), true, "the next holder's write");
      assert.equal(await write(dead), false, "the killed holder's late write is refused");
      assert.equal(await alive.release(), true);
    } finally {
      holder.child.kill('SIGKILL');
    }
  });
});

test('through PgBouncer in transaction mode (LISTEN on a direct client): readers together, then the writer', async () => {
  const bouncer = await startPgBouncer(server, { poolMode: 'transaction', poolSize: 2 });
  const pooled = new pg.Pool({ ...bouncer.connectionOptions, max: 4 });
  pooled.on('error', noop);
  const direct = new pg.Client(server.connectionOptions);
  direct.on('error', noop);
  await direct.connect();
  const table = `bounced_${process.pid}`;
  const bounced = new PostgresLockStore({ client: pooled, table, transactionPooling: true, listenClient: direct });
  try {
    await bounced.ensureSchema();
    const key = uniqueKey('pg bounced');
    let inside = 0;
    let all;
    const together = new Promise((resolve) => {
      all = resolve;
    });
    const read = () =>
      withLock({ key, store: bounced, ttl: TTL, wait: 20_000, mode: 'shared' }, async () => {
        if (++inside === 3) all();
        await within(10_000, 'three readers inside at once', together);
        return inside--;
      });
    const readers = [read(), read(), read()];
    await together;
    const writer = withLock({ key, store: bounced, ttl: TTL, wait: 20_000, mode: 'exclusive' }, () => inside);
    assert.deepEqual((await Promise.all(readers)).sort(), [1, 2, 3]);
    assert.equal(await writer, 0, 'the writer ran alone, after the readers');
  } finally {
    await bounced.close();
    await direct.end().catch(noop);
    await pooled.end().catch(noop);
    await bouncer.stop();
  }
});
