// One member of the fleet in js-tests/postgres-store.test.mjs: a separate Node process
// with its own pg.Pool and its own PostgresLockStore, taking ONE lock key `count` times
// through the real engine, imported by name.
//
//   node postgres-worker.mjs <connection url> <key> <count>
//
// Protocol on stdio, one JSON object a line: {"ready":true,"engine"} once connected;
// it starts when a line arrives on stdin (so the fleet starts together), and prints
// {"completed","max","records":[[position, token], ...],"errors":[...],"elapsedMs"} at
// the end. Inside the lock, on the shared `fleet` row: `inside + 1` (the answer must be
// 1), a second query while holding, `inside - 1`.

import pg from 'pg';
import { ResiliencePipelineBuilder, getLockToken, engine } from 'leasehold';
import { PostgresLockStore } from 'leasehold/postgres';
import { executeTimes, readyThenGo } from './fleet.mjs';

const [url, key, countText] = process.argv.slice(2);
const count = Number(countText);

const pool = new pg.Pool({ connectionString: url, max: 3 });
pool.on('error', () => {});
const store = new PostgresLockStore({ client: pool, table: 'fleet_locks' });
await store.ensureSchema();
const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '30s' }).build();

await readyThenGo({ engine });

let max = 0;
const { completed, records, errors, elapsedMs } = await executeTimes(
  count,
  pipeline,
  async () => {
    const token = getLockToken();
    const client = await pool.connect();
    try {
      const { rows } = await client.query(
        `UPDATE fleet SET inside = inside + 1, peak = greatest(peak, inside + 1), runs = runs + 1
         WHERE key = $1 RETURNING inside, runs`,
        [key],
      );
      const inside = Number(rows[0].inside);
      if (inside > max) max = inside;
      await client.query('SELECT pg_sleep(0)'); // a real round trip while holding
      await client.query('UPDATE fleet SET inside = inside - 1 WHERE key = $1', [key]);
      return [Number(rows[0].runs), token];
    } finally {
      client.release();
    }
  },
  (error) => `${error?.name}: ${error?.message}${error?.cause ? ` (cause: ${error.cause.message})` : ''}`,
);

await store.close();
await pool.end();
process.stdout.write(`${JSON.stringify({ completed, max, records, errors, elapsedMs })}\n`);
