// Child process for the Redis scenarios (4-6); see run.mjs. One JSON line out.
//
//   node bench/redis.mjs '{"scenario":"uncontended","lib":"floor","params":{...}}'
//
// Every loop is bounded by its count and by a deadline.

import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisServer } from '../js-tests/support/redis.mjs';
import { createRedisLock } from './adapters/redis.mjs';
import { connect, meet, serverCpuMs } from './support/redis-client.mjs';
import { readyThenWaitForGo, runChild } from './support/children.mjs';
import { gaps, quantiles } from './support/stats.mjs';
import { machineNow } from './support/clock.mjs';

const SELF = fileURLToPath(import.meta.url);
const noop = async () => 0;

async function roundTrip(client, count = 2000) {
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await client.ping();
    stamps[i + 1] = performance.now();
  }
  return quantiles(gaps(stamps, count)).p50;
}

/**
 * Scenario 4: `count` sequential executions, nobody else around; on one key, or with
 * `keys` (scenario 4b) on a different key each time, round-robin over that many.
 */
async function uncontended(lib, { port, count, warmup, ttlMs, keys = 1 }) {
  const client = await connect(port);
  const lock = await createRedisLock(lib, { client, ttlMs, waitMs: 0 });
  const names = Array.from({ length: keys }, (_, i) => `bench:uncontended:${lib}:${i}`);
  for (let i = 0; i < warmup; i++) await lock.run(names[i % keys], noop);
  const commands0 = client.benchCommands;
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await lock.run(names[(warmup + i) % keys], noop);
    stamps[i + 1] = performance.now();
  }
  const elapsedMs = stamps[count] - stamps[0];
  const commandsPerOp = (client.benchCommands - commands0) / count;
  const { p50, p99 } = quantiles(gaps(stamps, count));
  const rttMs = await roundTrip(client);
  await lock.close();
  client.disconnect();
  return { opsPerSec: (count / elapsedMs) * 1000, p50, p99, commandsPerOp, rttMs };
}

/** Entering the critical section of scenario 5, in one round trip: INCR the holders
 * counter (anything but 1 is a violation of exclusion) and swap in the last holder. */
const ENTER = `local holders = redis.call('INCR', KEYS[1])
local last = redis.call('GETSET', KEYS[2], ARGV[1])
return {holders, last or ''}`;

/**
 * Scenario 5, one member of the fleet of `processes`: up to `count` executions on the
 * shared key, waiting for it, stopping new ones after `deadlineMs`. Inside: ENTER
 * (awaited), then DECR the counter without awaiting it: it goes out on the same
 * connection before the library's release, so Redis runs it before the next holder can
 * enter, and the check costs one round trip inside the lock, not two. Also counts how
 * often this process follows itself as holder. `thinkMs` > 0: after each execution
 * (contended warm-up and measured part), the process waits that long on a timer before
 * asking again, as code that does other work between executions (scenario 5b).
 * Warm-up, so that the measured part runs code already compiled, as in scenario 4:
 * before it says it is ready, `warmup` executions of the same body on a key of its own
 * (nobody waits for it); after the start, `contendedWarmup` executions on a second
 * shared key with the whole fleet (the waiting paths: queues, messages, polls). Then
 * all processes start the measured part together. The last to arrive there reads
 * Redis's CPU time (`redisCpuMsAtStart`), so that Redis's share can be counted from
 * there.
 */
async function contendedWorker(lib, { port, key, count, processes, warmup, contendedWarmup, deadlineMs, ttlMs, waitMs, thinkMs = 0, concurrency = 1 }) {
  const client = await connect(port);
  const lock = await createRedisLock(lib, { client, ttlMs, waitMs });
  const me = `${process.pid}`;
  const errors = [];
  // The critical section on `counter`: ENTER, then DECR sent without awaiting it.
  const body = (counter, lastHolder, onLast) => async () => {
    const [holders, last] = await client.eval(ENTER, 2, counter, lastHolder, me);
    onLast(Number(holders), last);
    client.decr(counter).catch((error) => errors.push(`DECR: ${error?.message}`));
  };
  const own = `${key}:warm:${me}`;
  const warmBody = body(`${own}:holders`, `${own}:last`, () => {});
  for (let i = 0; i < warmup; i++) await lock.run(own, warmBody);
  const counter = `${key}:holders`;
  const lastHolder = `${key}:last`;
  let followedSelf = 0;
  let violations = 0;
  const enter = body(counter, lastHolder, (holders, last) => {
    if (holders !== 1) violations += 1;
    if (last === me) followedSelf += 1;
  });
  await readyThenWaitForGo();
  const shared = `${key}:warm`;
  const warmShared = body(`${shared}:holders`, `${shared}:last`, () => {});
  const warmDeadline = performance.now() + deadlineMs;
  let warmed = 0;
  const warmLoop = async () => {
    while (warmed < contendedWarmup && performance.now() < warmDeadline) {
      warmed += 1;
      try {
        await lock.run(shared, warmShared);
      } catch (error) {
        errors.push(`warm-up: ${error?.name}: ${error?.message}`);
      }
      if (thinkMs > 0) await sleep(thinkMs);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, warmLoop));
  // `meet` blocks the connection (BLPOP): nothing of the lock's may wait behind it.
  await lock.idle?.();
  const redisCpuMsAtStart = await meet(client, `${key}:measure`, processes, { whenAllArrived: () => serverCpuMs(port) });
  const waits = [];
  let completed = 0;
  const startedAt = machineNow();
  const cpu0 = process.cpuUsage();
  const deadline = performance.now() + deadlineMs;
  // `concurrency` loops share the process's `count` executions (scenario 5c: several
  // requests of one web service process wanting the same key at once).
  let started = 0;
  const loop = async () => {
    while (started < count && performance.now() < deadline) {
      started += 1;
      const asked = performance.now();
      try {
        await lock.run(key, async () => {
          waits.push(performance.now() - asked);
          await enter();
        });
        completed += 1;
      } catch (error) {
        errors.push(`${error?.name}: ${error?.message}`);
      }
      if (thinkMs > 0) await sleep(thinkMs);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const endedAt = machineNow();
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  await lock.close();
  client.disconnect();
  return { completed, violations, followedSelf, cpuMs, waits, errors: errors.slice(0, 5), errorCount: errors.length, startedAt, endedAt, redisCpuMsAtStart };
}

/** The protected resource of scenario 6: refuses a token lower than one it has seen. */
const FENCED_WRITE = `local token = tonumber(ARGV[1])
if token == nil then
  redis.call('SET', KEYS[1] .. ':value', ARGV[2])
  return 1
end
local seen = tonumber(redis.call('GET', KEYS[1]) or '-1')
if token < seen then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[1] .. ':value', ARGV[2])
return 1`;

async function fencedWrite(client, key, token, writer) {
  const accepted = await client.eval(FENCED_WRITE, 1, `${key}:fence`, token === undefined ? '' : String(token), writer);
  return Number(accepted) === 1;
}

/** Scenario 6, the other process: takes the key once the data is gone, writes. */
async function restartTaker(lib, { port, key, ttlMs }) {
  const client = await connect(port);
  const lock = await createRedisLock(lib, { client, ttlMs, waitMs: 5000 });
  let out;
  await lock.run(key, async ({ token }) => {
    out = { token, accepted: await fencedWrite(client, key, token, 'taker') };
  });
  await lock.close();
  client.disconnect();
  return out;
}

/**
 * Scenario 6: hold a lease, restart Redis (no persistence: the lease is gone), let
 * another process take the key and write to the fenced resource, then write as the
 * stale holder. Measures when the holder is told (its library's loss signal).
 */
async function restartOnce(lib, server, { ttlMs, offsetMs }) {
  const client = await connect(server.port);
  const key = `bench:restart:${lib}:${offsetMs}`;
  let learnedAt;
  let resolveLearned;
  const learned = new Promise((resolve) => {
    resolveLearned = resolve;
  });
  const onLost = () => {
    learnedAt ??= performance.now();
    resolveLearned();
  };
  const lock = await createRedisLock(lib, { client, ttlMs, waitMs: 0, onLost });
  const out = { offsetMs };
  let outcome = 'ok';
  try {
    await lock.run(key, async ({ token }) => {
      out.hasToken = token !== undefined;
      await sleep(offsetMs);
      const stopAt = performance.now();
      await server.restart();
      const upAt = performance.now();
      out.downMs = upAt - stopAt;
      const taker = await runChild(SELF, { scenario: 'restartTaker', lib, params: { port: server.port, key, ttlMs } }, {
        env: process.env,
        timeoutMs: 20_000,
      });
      out.takerAccepted = taker?.accepted === true;
      out.takerTokenHigher = typeof token === 'number' && typeof taker?.token === 'number' ? taker.token > token : undefined;
      out.staleAccepted = await fencedWrite(client, key, token, 'stale holder');
      // Wait for the loss signal: at most until the lease would have run out, and a bit.
      const waitMs = stopAt + ttlMs + 500 - performance.now();
      if (waitMs > 0) await Promise.race([learned, sleep(waitMs)]);
      out.learnedAfterStopMs = learnedAt === undefined ? undefined : learnedAt - stopAt;
      out.learnedAfterUpMs = learnedAt === undefined ? undefined : learnedAt - upAt;
    });
  } catch (error) {
    outcome = `${error?.name ?? 'Error'}`;
  }
  out.holderOutcome = outcome;
  out.rttMs = await roundTrip(client, 200);
  await lock.close();
  client.disconnect();
  return out;
}

async function restart(lib, { ttlMs, offsets }) {
  const server = await startRedisServer();
  try {
    const rounds = [];
    for (const offsetMs of offsets) rounds.push(await restartOnce(lib, server, { ttlMs, offsetMs }));
    return { rounds };
  } finally {
    await server.stop();
  }
}

const SCENARIOS = { uncontended, contendedWorker, restartTaker, restart };

const { scenario, lib, params } = JSON.parse(process.argv[2]);
process.on('unhandledRejection', (reason) => {
  process.stderr.write(`unhandled rejection in ${lib} ${scenario}: ${reason?.stack ?? reason}\n`);
});
const result = await SCENARIOS[scenario](lib, params);
process.stdout.write(`${JSON.stringify(result)}\n`);
// Libraries may leave timers or sockets behind (a refresh interval, a subscriber); the
// result is out, so end here rather than wait for them.
process.exit(0);
