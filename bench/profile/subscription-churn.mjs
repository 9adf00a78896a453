// Diagnosis: what a RedisLockStore's subscription bookkeeping costs when waiters on many
// distinct keys come and go one at a time (each in a turn of its own), as in a service
// whose executions wait on many keys at once. Prints the wall and CPU time of N
// subscribes, then of their N unsubscribes, one per turn of the event loop.
//
//   node bench/profile/subscription-churn.mjs [N=20000]
//
// Starts its own redis-server.

import { createRequire } from 'node:module';
import { startRedisServer } from '../../js-tests/support/redis.mjs';

const require = createRequire(import.meta.url);
const Redis = require('ioredis');
const { RedisLockStore } = await import('../../lib/stores/redis/index.mjs');

const N = Number(process.argv[2] ?? 20_000);
const server = await startRedisServer();
const client = new Redis({ port: server.port, host: '127.0.0.1' });
const store = new RedisLockStore({ client, prefix: 'churn' });
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const cpuMs = (u) => (u.user + u.system) / 1000;

const offs = [];
let cpu = process.cpuUsage();
let t = performance.now();
for (let i = 0; i < N; i++) {
  offs.push(store.subscribe(`k${i}`, () => {}));
  await nextTurn();
}
console.log(`${N} subscribes, one per turn: ${(performance.now() - t).toFixed(0)} ms wall, ${cpuMs(process.cpuUsage(cpu)).toFixed(0)} ms CPU`);
cpu = process.cpuUsage();
t = performance.now();
for (const off of offs) {
  off();
  await nextTurn();
}
console.log(`${N} unsubscribes, one per turn: ${(performance.now() - t).toFixed(0)} ms wall, ${cpuMs(process.cpuUsage(cpu)).toFixed(0)} ms CPU`);
await store.close();
client.disconnect();
await server.stop();
