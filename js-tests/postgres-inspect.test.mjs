// PostgresLockStore's `inspect` and `list` against a real PostgreSQL server: a held key
// read exactly while two executions wait for it (the table keeps no queue: no waiters
// shown), a missing key, a lease just expired, and `list` paging through the primary
// index ensureSchema() makes, by prefix and limit.
// Run: node --test js-tests/postgres-inspect.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { PostgresLockStore } from 'leasehold/postgres';
import { acquireLock, withLock } from './support/leasehold.mjs';
import { startPostgres, waitFor } from './support/postgres.mjs';
import { noUnhandledRejections } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';

noUnhandledRejections(before, after);

let server;
let pool;
let store;

before(async () => {
  server = await startPostgres();
  pool = new pg.Pool({ ...server.connectionOptions, max: 4 });
  // The server stops at the end with the pool's connections closing: not an error here.
  pool.on('error', () => {});
  store = new PostgresLockStore({ client: pool });
  await store.ensureSchema();
});

after(async () => {
  await store?.close();
  await pool?.end();
  await server?.stop();
});

async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

test('a held key: its holder, token and time left; waiters poll, so none is shown', async () => {
  const key = uniqueKey('pg held');
  const lease = await acquireLock(store, key, 10_000);
  const others = [new PostgresLockStore({ client: pool }), new PostgresLockStore({ client: pool })];
  const runs = others.map((s) => withLock({ key, store: s, ttl: 10_000, wait: 30_000 }, () => store.inspect(key)));
  const inspection = await store.inspect(key);
  assert.deepEqual(Object.keys(inspection), ['key', 'holders', 'waiters']);
  assert.equal(inspection.key, key);
  assert.equal(inspection.holders.length, 1);
  assert.equal(inspection.holders[0].owner, lease.owner);
  assert.equal(inspection.holders[0].fencingToken, lease.fencingToken);
  assert.ok(inspection.holders[0].ttl > 0 && inspection.holders[0].ttl <= 10_000);
  assert.deepEqual(inspection.waiters, []);
  await lease.release();
  const seen = await Promise.all(runs);
  for (const s of seen) assert.ok(s.holders[0].fencingToken > lease.fencingToken, 'each waiter held it after');
  assert.notEqual(seen[0].holders[0].owner, seen[1].holders[0].owner);
  await Promise.all(others.map((s) => s.close()));
  assert.equal(await store.inspect(key), undefined, 'released: nothing there');
});

test('a missing key, and a lease that just expired', async () => {
  assert.equal(await store.inspect(uniqueKey('never')), undefined);
  const key = uniqueKey('pg expiring');
  assert.ok(await store.acquire(key, 'short-lived', 30));
  await waitFor('the lease to expire', async () => (await store.ttl(key)) === undefined, { timeoutMs: 2_000 });
  assert.equal(await store.inspect(key), undefined);
  assert.deepEqual(await collect(store.list({ prefix: key })), []);
});

test('list: held keys by prefix and limit, in pages of an index', async () => {
  const base = uniqueKey('pg list');
  // 1,200 live leases (more than two pages), and released and expired rows between them.
  await pool.query(
    `INSERT INTO leasehold_locks (key_digest, key, owner, expires_at, token)
     SELECT sha256(convert_to(k, 'UTF8')), k, CASE WHEN i % 3 = 0 THEN NULL ELSE 'o' END,
            clock_timestamp() + CASE WHEN i % 3 = 1 THEN interval '-1 second' ELSE interval '1 minute' END, i
     FROM generate_series(1, 1800) AS i, LATERAL (SELECT $1::text || '/' || i AS k) AS keys`,
    [base],
  );
  const listed = await collect(store.list({ prefix: `${base}/` }));
  assert.equal(listed.length, 600, 'only live leases');
  assert.deepEqual(listed, [...listed].sort(), 'in byte order');
  assert.equal(new Set(listed).size, 600, 'each once');
  assert.ok(listed.every((k) => Number(k.split('/')[1]) % 3 === 2));
  assert.equal((await collect(store.list({ prefix: base, limit: 501 }))).length, 501);
  assert.deepEqual(await collect(store.list({ prefix: base, limit: 0 })), []);
  assert.deepEqual(await collect(store.list({ prefix: `${base}/x` })), []);
  // The store's page statement: on a table of some size (50,000 rows more), with
  // statistics, the planner walks the index ensureSchema() made, within the prefix's range.
  await pool.query(
    `INSERT INTO leasehold_locks (key_digest, key, owner, expires_at, token)
     SELECT sha256(convert_to(k, 'UTF8')), k, 'o', clock_timestamp() + interval '1 minute', i
     FROM generate_series(1, 50000) AS i, LATERAL (SELECT 'bulk/' || i AS k) AS keys`,
  );
  await pool.query('ANALYZE leasehold_locks');
  const plan = await pool.query(
    `EXPLAIN SELECT key_digest, key, (left(key, 200) COLLATE "C") AS head FROM leasehold_locks
     WHERE ((left(key, 200) COLLATE "C"), key_digest) > ($1::text COLLATE "C", $2::bytea)
       AND (left(key, 200) COLLATE "C") < ($5::text COLLATE "C")
       AND starts_with(key, $3::text) AND owner IS NOT NULL AND expires_at > clock_timestamp()
     ORDER BY (left(key, 200) COLLATE "C"), key_digest LIMIT $4::int`,
    [`${base}/`, Buffer.alloc(0), `${base}/`, 500, `${base}0`],
  );
  assert.match(plan.rows.map((r) => r['QUERY PLAN']).join('\n'), /Index Scan (using|on) leasehold_locks_key_start/);
  assert.throws(() => store.list({ prefix: 'a\u0000' }), TypeError);
  assert.throws(() => store.list({ other: 1 }), TypeError);
  await assert.rejects(store.inspect(''), TypeError);
});
