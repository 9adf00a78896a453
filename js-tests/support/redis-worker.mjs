// One member of the fleet in js-tests/redis-engine.test.mjs: a separate Node process
// with its own Redis client (ioredis or node-redis) and its own RedisLockStore, taking
// ONE lock key `count` times through the real engine, imported by name.
//
//   node redis-worker.mjs <ioredis|node-redis> <port> <key> <count>
//
// Protocol on stdio, one JSON object a line: it prints {"ready":true} once connected,
// starts when a line arrives on stdin (so the fleet starts together), and prints its
// result {"kind","completed","max","records":[[order, token], ...],"errors":[...]} at the
// end. Inside the lock: INCR a shared counter (must answer 1), INCR a global order
// counter (the order of critical sections across the fleet), PING (a real yield to the
// event loop while holding), DECR the counter.

import { ResiliencePipelineBuilder, getLockToken, engine } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { executeTimes, readyThenGo } from './fleet.mjs';
import { connectIoredis, connectNodeRedis } from './redis-clients.mjs';

const [kind, portText, key, countText] = process.argv.slice(2);
const port = Number(portText);
const count = Number(countText);

async function connect() {
  if (kind === 'ioredis') {
    const client = await connectIoredis(port);
    return { client, close: () => client.disconnect() };
  }
  if (kind === 'node-redis') {
    const client = await connectNodeRedis(port);
    return { client, close: () => client.destroy() };
  }
  throw new Error(`unknown client kind ${kind}`);
}

const { client, close } = await connect();
const store = new RedisLockStore({ client, prefix: 'fleet' });
const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '30s' }).build();
const counter = `fleet-counter:${key}`;
const order = `fleet-order:${key}`;

await readyThenGo({ engine });

let max = 0;
const { completed, records, errors, elapsedMs } = await executeTimes(
  count,
  pipeline,
  async () => {
    const token = getLockToken();
    const inside = Number(await client.incr(counter));
    if (inside > max) max = inside;
    const position = Number(await client.incr(order));
    await client.ping();
    await client.decr(counter);
    return [position, token];
  },
  (error) => `${error?.name}: ${error?.message}`,
);

await store.close();
close();
process.stdout.write(`${JSON.stringify({ kind, completed, max, records, errors, elapsedMs })}\n`);
