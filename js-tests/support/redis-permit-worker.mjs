// A process using permits on a RedisLockStore through the real engine, for
// js-tests/redis-permits-engine.test.mjs. One JSON object a line on stdout. Two modes:
//
//   node redis-permit-worker.mjs fleet <ioredis|node-redis> <port> <key> <limit> <weight> <loops> <each>
//     Prints {"ready":true,"engine"}, starts when a line arrives on stdin, then runs
//     `loops` loops at once, each `each` executions with { limit, weight }. Inside:
//     INCRBY a shared counter by `weight` (the permits inside across the fleet: never
//     above `limit`), a 5 ms pause, DECRBY. Prints {"kind","completed","max","violations",
//     "tokens","errors"}. With <limit> 'shared' or 'exclusive' (and any <weight>) the lock
//     has that mode instead, a reader counting 1 and a writer 1000: a writer must find
//     1000 exactly (alone), a reader less than 1000 (no writer inside).
//
//   node redis-permit-worker.mjs hold <ioredis|node-redis> <port> <key> <limit> <weight> <ttl ms>
//     Takes `weight` of `limit` permits and prints {"holding":true,"token"}; holds them
//     (renewing) until the process is killed. For each line "write <resource>" on stdin
//     it writes to that fenced resource with its token, its signal ignored on purpose
//     (a holder that does not check it in time), and prints {"written":1|0,"aborted"}.

import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { ResiliencePipelineBuilder, getLockToken, engine } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { readyThenGo } from './fleet.mjs';
import { connectIoredis, connectNodeRedis } from './redis-clients.mjs';
import { fencedWrite } from './redis-fence.mjs';

const [mode, kind, portText, key, limitText, weightText, ...rest] = process.argv.slice(2);
const [limit, weight] = [Number(limitText), Number(weightText)];
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

const client = kind === 'ioredis' ? await connectIoredis(Number(portText)) : await connectNodeRedis(Number(portText));
const close = () => (kind === 'ioredis' ? client.disconnect() : client.destroy());
const store = new RedisLockStore({ client, prefix: 'permits' });
const incrBy = (name, n) => (kind === 'ioredis' ? client.incrby(name, n) : client.incrBy(name, n));

if (mode === 'hold') {
  const ttl = Number(rest[0]);
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl, wait: '10s', limit, weight }).build();
  await pipeline.execute(async ({ signal }) => {
    const token = getLockToken();
    say({ holding: true, token });
    for await (const line of createInterface({ input: process.stdin })) {
      const [verb, resource] = line.split(' ');
      if (verb === 'write') say({ written: await fencedWrite(client, resource, token), aborted: signal.aborted });
    }
    await new Promise(() => {}); // until killed
  });
} else if (mode === 'fleet') {
  const [loops, each] = rest.map(Number);
  const mode = limitText === 'shared' || limitText === 'exclusive' ? limitText : undefined;
  const permits = mode === undefined ? { limit, weight } : { mode };
  const units = mode === undefined ? weight : mode === 'shared' ? 1 : 1000;
  const broken = (inside) => (mode === undefined ? inside > limit : mode === 'shared' ? inside >= 1000 : inside !== 1000);
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '30s', ...permits }).build();
  const counter = `permits-inside:${key}`;
  let violations = 0;
  await readyThenGo({ engine });
  let max = 0;
  let completed = 0;
  const tokens = [];
  const errors = [];
  const loop = async () => {
    for (let i = 0; i < each; i++) {
      try {
        await pipeline.execute(async () => {
          tokens.push(getLockToken());
          const inside = Number(await incrBy(counter, units));
          if (inside > max) max = inside;
          if (broken(inside)) violations += 1;
          await sleep(5);
          await incrBy(counter, -units);
        });
        completed += 1;
      } catch (error) {
        errors.push(`${error?.name}: ${error?.message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: loops }, loop));
  await store.close();
  close();
  say({ kind, weight: mode ?? weight, completed, max, violations, tokens, errors });
} else {
  throw new Error(`unknown mode ${mode}`);
}
