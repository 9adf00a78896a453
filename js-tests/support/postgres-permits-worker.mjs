// A process of js-tests/postgres-permits.test.mjs: its own pg.Pool and PostgresLockStore,
// taking permits of one key through the real engine, imported by name.
//
//   node postgres-permits-worker.mjs <url> run <key> <weight> <limit> <count>
//     two concurrent loops of <count> executions each, with `limit` and `weight`; inside,
//     the shared `inside` row counts the weights in (and its peak). Prints
//     {"tokens":[...],"errors":[...]} at the end.
//   node postgres-permits-worker.mjs <url> hold <key> <weight> <limit> <ttl ms>
//     takes the permits (renewed) and keeps them until killed.
//
// Both print {"ready":true,...} first; `run` starts when a line arrives on stdin.

import pg from 'pg';
import { ResiliencePipelineBuilder, acquireLock, getLockToken } from 'leasehold';
import { PostgresLockStore } from 'leasehold/postgres';
import { executeTimes, readyThenGo } from './fleet.mjs';

const [url, mode, key, weightText, limitText, last] = process.argv.slice(2);
const [weight, limit] = [Number(weightText), Number(limitText)];

const pool = new pg.Pool({ connectionString: url, max: 4 });
pool.on('error', () => {});
const store = new PostgresLockStore({ client: pool });
await store.ensureSchema();

if (mode === 'hold') {
  const lease = await acquireLock(store, key, Number(last), { limit, weight, wait: '30s', autoRenew: true });
  process.stdout.write(`${JSON.stringify({ ready: true, token: lease.fencingToken })}\n`);
  setInterval(() => {}, 60_000); // held until this process is killed
} else {
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '60s', limit, weight }).build();
  await readyThenGo({});
  const section = async () => {
    const token = getLockToken();
    const client = await pool.connect();
    try {
      await client.query('UPDATE inside SET now = now + $2, peak = greatest(peak, now + $2), runs = runs + 1 WHERE key = $1', [key, weight]);
      await client.query('SELECT pg_sleep(0.002)'); // inside for a while
      await client.query('UPDATE inside SET now = now - $2 WHERE key = $1', [key, weight]);
      return token;
    } finally {
      client.release();
    }
  };
  const describeError = (error) => `${error?.name}: ${error?.message}`;
  const loops = await Promise.all([0, 1].map(() => executeTimes(Number(last), pipeline, section, describeError)));
  await store.close();
  await pool.end();
  const tokens = loops.flatMap((l) => l.records);
  const errors = loops.flatMap((l) => l.errors);
  process.stdout.write(`${JSON.stringify({ tokens, errors })}\n`);
}
