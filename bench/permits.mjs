// Child process for scenario 8 (permits); see bench/scenario-permits.mjs, which starts
// it. One JSON line out.
//
//   node bench/permits.mjs '{"scenario":"memory","lib":"async-sema","params":{...}}'
//
// Every loop is bounded by its count and by a deadline.

import { builds, createMemorySemaphore, createRedisSemaphore } from './adapters/permits.mjs';
import { readyThenWaitForGo } from './support/children.mjs';
import { connect, meet, serverCpuMs } from './support/redis-client.mjs';
import { quantiles } from './support/stats.mjs';
import { machineNow } from './support/clock.mjs';

/**
 * One pass of scenario 8: `tasks` tasks on one semaphore of `limit` permits, each
 * acquiring `perTask` times and yielding once (a microtask) inside. The callbacks count
 * who is inside: entering with `limit` already inside is a violation. Wait: from asking
 * to the callback starting. Out-of-order: grants whose request came after a later
 * grant's (shown, not a target: FIFO is not every peer's promise).
 */
async function memoryPass(run, { tasks, perTask, limit, deadlineMs }) {
  const waits = new Float64Array(tasks * perTask);
  let inside = 0;
  let maxInside = 0;
  let violations = 0;
  let nextTicket = 0;
  let lastGranted = -1;
  let outOfOrder = 0;
  let completed = 0;
  let waited = 0;
  let stop = false;
  const t0 = performance.now();
  const deadline = t0 + deadlineMs;
  async function task() {
    for (let i = 0; i < perTask && !stop; i++) {
      const ticket = nextTicket++;
      const asked = performance.now();
      await run(async () => {
        waits[waited++] = performance.now() - asked;
        inside += 1;
        if (inside > limit) violations += 1;
        if (inside > maxInside) maxInside = inside;
        if (ticket < lastGranted) outOfOrder += 1;
        lastGranted = ticket;
        await null; // the one yield while holding
        inside -= 1;
        completed += 1;
      });
      if (performance.now() > deadline) stop = true;
    }
  }
  await Promise.all(Array.from({ length: tasks }, task));
  const elapsedMs = performance.now() - t0;
  const { p50, p99 } = quantiles(waits, waited);
  return { opsPerSec: (completed / elapsedMs) * 1000, completed, waitP50: p50, waitP99: p99, violations, maxInside, outOfOrder };
}

/** Scenario 8: a cold pass, then the measured warm pass, on one semaphore in a fresh process. */
async function memory(lib, params) {
  const run = await createMemorySemaphore(lib, { key: 'bench:permits', limit: params.limit });
  const cold = await memoryPass(run, params);
  const warm = await memoryPass(run, params);
  return {
    ...warm,
    planned: params.tasks * params.perTask,
    coldOpsPerSec: cold.opsPerSec,
    violations: cold.violations + warm.violations,
    maxInside: Math.max(cold.maxInside, warm.maxInside),
    build: builds()[lib],
  };
}

/**
 * Scenario 8r, one member of a fleet of `processes`: `concurrency` loops at once on one
 * client sharing up to `count` executions on `key`, holding one of `limit` permits,
 * stopping new ones after `deadlineMs`. Inside, two round trips: INCR of the key's
 * holders counter (an answer above `limit` is a violation; the highest is kept), then
 * DECR, awaited, before the library releases. Also measured, for the model of a
 * permit's cycle: the time inside (the two round trips), the release (from the callback's
 * end to the library's promise resolving), the commands sent on the client (the lock's,
 * where it uses this connection, and the two inside), and the PING round trip at the end.
 * Warm-up as in scenario 5: `warmup`
 * executions alone on a key of its own, then (after the start) `contendedWarmup` with
 * the fleet on a second shared key, then all meet and run the measured part together.
 */
async function redisWorker(lib, { port, key, count, processes, concurrency, limit, warmup, contendedWarmup, deadlineMs, ttlMs, waitMs }) {
  const client = await connect(port);
  const lock = await createRedisSemaphore(lib, { client, limit, ttlMs, waitMs });
  const errors = [];
  const body = (counter, onHolders) => async () => {
    const holders = Number(await client.incr(counter));
    onHolders(holders);
    await client.decr(counter);
  };
  const own = `${key}:warm:${process.pid}`;
  const warmBody = body(`${own}:holders`, () => {});
  for (let i = 0; i < warmup; i++) await lock.run(own, warmBody);
  let violations = 0;
  let maxHolders = 0;
  const enter = body(`${key}:holders`, (holders) => {
    if (holders > limit) violations += 1;
    if (holders > maxHolders) maxHolders = holders;
  });
  await readyThenWaitForGo();
  const shared = `${key}:warm`;
  const warmShared = body(`${shared}:holders`, () => {});
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
    }
  };
  await Promise.all(Array.from({ length: concurrency }, warmLoop));
  // `meet` blocks the connection (BLPOP): nothing of the lock's is waiting on it now.
  const redisCpuMsAtStart = await meet(client, `${key}:measure`, processes, { whenAllArrived: () => serverCpuMs(port) });
  const waits = [];
  const insides = [];
  const releases = [];
  let completed = 0;
  let started = 0;
  const startedAt = machineNow();
  const cpu0 = process.cpuUsage();
  const commands0 = client.benchCommands;
  const deadline = performance.now() + deadlineMs;
  const loop = async () => {
    while (started < count && performance.now() < deadline) {
      started += 1;
      const asked = performance.now();
      let entered;
      let left;
      try {
        await lock.run(key, async () => {
          entered = performance.now();
          waits.push(entered - asked);
          await enter();
          left = performance.now();
        });
        insides.push(left - entered);
        releases.push(performance.now() - left);
        completed += 1;
      } catch (error) {
        errors.push(`${error?.name}: ${error?.message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const endedAt = machineNow();
  const cpu = process.cpuUsage(cpu0);
  const commands = client.benchCommands - commands0;
  // The round trip of this client once the measured part is over (the fleet may still run).
  const pings = new Float64Array(200);
  for (let i = 0; i < pings.length; i++) {
    const t = performance.now();
    await client.ping();
    pings[i] = performance.now() - t;
  }
  await lock.close();
  client.disconnect();
  return {
    completed,
    violations,
    maxHolders,
    cpuMs: (cpu.user + cpu.system) / 1000,
    waits,
    commands,
    insideP50: quantiles(insides).p50,
    releaseP50: quantiles(releases).p50,
    rttMs: quantiles(pings).p50,
    errors: errors.slice(0, 5),
    errorCount: errors.length,
    startedAt,
    endedAt,
    redisCpuMsAtStart,
    build: builds()[lib],
  };
}

const SCENARIOS = { memory, redisWorker };

const { scenario, lib, params } = JSON.parse(process.argv[2]);
process.on('unhandledRejection', (reason) => {
  process.stderr.write(`unhandled rejection in ${lib} ${scenario}: ${reason?.stack ?? reason}\n`);
});
// A library that refuses the scenario (a store without permits) says why in its result.
const result = await SCENARIOS[scenario](lib, params).catch((error) => ({ failed: `${error?.name}: ${error?.message}` }));
process.stdout.write(`${JSON.stringify(result)}\n`);
// Libraries may leave timers or sockets behind (a refresh interval, a subscriber); the
// result is out, so end here rather than wait for them.
process.exit(0);
