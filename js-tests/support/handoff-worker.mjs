// Another process for js-tests/local-handoff.test.mjs: executions of one key through the
// real engine on a RedisLockStore or a PostgresLockStore of its own, reporting on stdout,
// one JSON object a line.
//
//   node handoff-worker.mjs <redis|postgres> <redis port | pg url> <key> <ttl ms> <mode>
//
// Modes:
//   loop   4 executions at a time (each waiting up to 3 s), back to back, until a line
//          "stop" arrives on stdin.
//          Each prints {token, at} as its callback starts (`at`: Date.now(), the clock
//          the test shares), then {stopped, errors} at the end.
//   once   one execution (waiting up to 20 s); prints {token, waitedMs} or {error}.
// Both print {ready} once connected.

import { createInterface } from 'node:readline';
import Redis from 'ioredis';
import pg from 'pg';
import { ResiliencePipelineBuilder, getLockToken } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { PostgresLockStore } from 'leasehold/postgres';

const [kind, where, key, ttlText, mode] = process.argv.slice(2);
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const noop = () => {};

let close;
let store;
if (kind === 'redis') {
  const client = new Redis({ host: '127.0.0.1', port: Number(where), maxRetriesPerRequest: 1 });
  client.on('error', noop);
  store = new RedisLockStore({ client, prefix: 'handoff' });
  close = async () => {
    await store.close();
    client.disconnect();
  };
} else {
  const pool = new pg.Pool({ connectionString: where, max: 4 });
  pool.on('error', noop);
  store = new PostgresLockStore({ client: pool, table: 'handoff_locks' });
  close = async () => {
    await store.close();
    await pool.end();
  };
}
const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: Number(ttlText), wait: mode === 'loop' ? '3s' : '20s' }).build();

let stopping = false;
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line === 'stop') stopping = true;
});
say({ ready: true });

if (mode === 'loop') {
  let errors = 0;
  const loop = async () => {
    while (!stopping) {
      try {
        await pipeline.execute(async () => {
          say({ token: getLockToken(), at: Date.now() });
          await null;
        });
      } catch {
        errors += 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  };
  await Promise.all([loop(), loop(), loop(), loop()]);
  say({ stopped: true, errors });
} else {
  const started = performance.now();
  try {
    const token = await pipeline.execute(() => getLockToken());
    say({ token, waitedMs: performance.now() - started });
  } catch (error) {
    say({ error: String(error) });
  }
}
await close();
lines.close();
process.stdin.destroy();
