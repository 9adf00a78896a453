// Scenario 8 (permits, issue 28) for bench/run.mjs: its definitions, runs and tables.
// The children are bench/permits.mjs; the semaphores, bench/adapters/permits.mjs.
//
// - 8 (memory): `tasks` tasks on one key with `limit` permits, each acquiring, yielding
//   once inside and releasing, against async-sema, @henrygd/semaphore and async-mutex's
//   Semaphore. Target: leasehold ≥ 1× the best peer's ops/s, 0 violations.
// - 8r (Redis): `processes` processes × `concurrency` executions at once, `limit`
//   permits, two round trips inside, against redis-semaphore's Semaphore. Targets: ≥ 2×
//   its ops/s, wait p99 ≤ a fifth of its, 0 violations.
//
// `run.mjs --only=8` runs both; `--permits=memory` or `--permits=redis` one of them.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MEMORY_PERMIT_LIBS, REDIS_PERMIT_LIBS } from './adapters/permits.mjs';
import { engineEnv, runChild, startFleet } from './support/children.mjs';
import { serverCpuMs } from './support/redis-client.mjs';
import { fmtInt, fmtMs, fmtRatio, median } from './support/stats.mjs';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'permits.mjs');
const isLeasehold = (lib) => lib.startsWith('leasehold-');

function permitParams(quick) {
  return {
    memory: quick
      ? { tasks: 64, perTask: 100, limit: 4, deadlineMs: 3_000, rounds: 2 }
      : { tasks: 64, perTask: 1_000, limit: 4, deadlineMs: 8_000, rounds: 3 },
    redis: quick
      ? { processes: 8, concurrency: 8, perProcess: 50, limit: 3, warmup: 50, contendedWarmup: 20, deadlineMs: 3_000, ttlMs: 10_000, waitMs: 60_000, rounds: 1 }
      : { processes: 8, concurrency: 8, perProcess: 500, limit: 3, warmup: 500, contendedWarmup: 200, deadlineMs: 6_000, ttlMs: 10_000, waitMs: 60_000, rounds: 3 },
  };
}

/**
 * Runs scenario 8 (and 8r) and adds its tables to `sections` and its targets through
 * `target`. `h` carries run.mjs's helpers: quick, argv, roundsOf, interleave, med,
 * ratio, bestPeer, table, target, sections, log, available.
 */
export async function runPermits(h) {
  const P = permitParams(h.quick);
  const which = h.argv.find((a) => a.startsWith('--permits='))?.split('=')[1];
  if (![undefined, 'memory', 'redis'].includes(which)) throw new Error(`--permits=${which}: memory or redis`);
  if (which !== 'redis') await memoryScenario(h, P.memory);
  if (which !== 'memory') await redisScenario(h, P.redis);
}

async function memoryScenario(h, p) {
  const libs = MEMORY_PERMIT_LIBS.filter(h.available);
  h.log(`8. memory, permits: ${p.tasks} tasks × ${p.perTask}, limit ${p.limit}, ${h.roundsOf(p)} rounds`);
  const r = await h.interleave(libs, h.roundsOf(p), async (lib) =>
    succeeded(lib, await runChild(CHILD, { scenario: 'memory', lib, params: p }, { env: engineEnv(lib), timeoutMs: 2 * p.deadlineMs + 60_000 })),
  );
  const best = h.bestPeer(r, 'opsPerSec');
  const worst = (lib, field) => Math.max(...r[lib].map((x) => x?.[field] ?? NaN));
  h.sections.push(
    `### 8. Memory, permits: ${p.tasks} tasks × ${fmtInt(p.perTask)} acquisitions of one key with limit ${p.limit}, one yield inside\n\n` +
      `Each task acquires one of the key's ${p.limit} permits, yields once (a microtask) inside, releases, and asks again. ` +
      'leasehold-<engine>: a pipeline with `addLock({ key, limit, wait: Infinity })`; -withlock: `withLock(key, fn, { limit, wait: Infinity })`. ' +
      `async-sema: \`new Sema(${p.limit})\`; henrygd-semaphore: \`getSemaphore(key, ${p.limit})\`; async-mutex: \`new Semaphore(${p.limit}).runExclusive(fn)\`. ` +
      'Each process runs the scenario twice on one semaphore, a cold pass and the measured warm pass (as scenario 3). ' +
      `Wait: from asking to the callback starting. Violations: callbacks that entered with ${p.limit} already inside (max inside: the most at once); ` +
      'out-of-order: grants whose request came after a later grant\'s (shown, not a target). ' +
      `Build: the file each peer's module resolved to. ${h.roundsOf(p)} rounds.\n\n` +
      h.table(
        ['library', 'build', 'ops/s', 'completed', 'wait p50', 'wait p99', 'cold: ops/s', 'max inside', 'violations', 'out-of-order', `× best peer (${best})`, 'wait p99 × best peer'],
        libs.map((lib) => [
          lib,
          r[lib].find((x) => x?.build)?.build ?? '–',
          fmtInt(h.med(r[lib], 'opsPerSec')),
          `${fmtInt(h.med(r[lib], 'completed'))} / ${fmtInt(p.tasks * p.perTask)}`,
          fmtMs(h.med(r[lib], 'waitP50')),
          fmtMs(h.med(r[lib], 'waitP99')),
          fmtInt(h.med(r[lib], 'coldOpsPerSec')),
          fmtInt(worst(lib, 'maxInside')),
          fmtInt(worst(lib, 'violations')),
          fmtInt(worst(lib, 'outOfOrder')),
          fmtRatio(h.ratio(r, lib, best, 'opsPerSec')),
          fmtRatio(h.ratio(r, lib, best, 'waitP99')),
        ]),
      ),
  );
  for (const lib of libs.filter(isLeasehold)) {
    const x = h.ratio(r, lib, best, 'opsPerSec');
    const v = Math.max(...r[lib].map((o) => o?.violations ?? Infinity));
    h.target(8, `${lib.slice(10)}: ≥ 1× the best peer (${best}, ops/s), 0 violations`, x >= 1 && v === 0,
      x === undefined ? notRun(r[lib]) : `${fmtRatio(x)}, ${v} violations`);
  }
  return r;
}

async function redisScenario(h, p) {
  const libs = REDIS_PERMIT_LIBS.filter(h.available);
  const ref = 'redis-semaphore';
  const { startRedisServer, call } = await import('../js-tests/support/redis.mjs');
  const redis = await startRedisServer();
  h.log(`8r. Redis, permits: ${p.processes} processes × ${p.concurrency} at once × ${p.perProcess}, limit ${p.limit}, ${h.roundsOf(p)} rounds (redis-server on ${redis.port})`);
  let r;
  try {
    r = await h.interleave(libs, h.roundsOf(p), async (lib) => {
      await call(redis.port, ['FLUSHALL']);
      await call(redis.port, ['SCRIPT', 'FLUSH']);
      return fleetRound(h, lib, { ...p, port: redis.port, key: `bench:permits:${lib}`, count: p.perProcess });
    });
  } finally {
    await redis.stop();
  }
  const worst = (lib, field) => Math.max(...r[lib].map((x) => x?.[field] ?? NaN));
  h.sections.push(
    `### 8r. Redis, permits: ${p.processes} processes × ${p.concurrency} executions at once, limit ${p.limit}\n\n` +
      `Each process runs ${p.concurrency} loops at once on its one client (${p.processes * p.concurrency} contenders), sharing its ${fmtInt(p.perProcess)} executions, ` +
      `each holding one of the key's ${p.limit} permits. Inside, two round trips: INCR of a holders counter (an answer above ${p.limit} is a violation; max holders: the highest answer) and DECR, awaited, before the release. ` +
      `Warm-up as in scenario 5 (${fmtInt(p.warmup)} executions alone, then ${fmtInt(p.contendedWarmup)} each with the fleet on another key). ` +
      `redis-semaphore: \`new Semaphore(client, key, ${p.limit}, { lockTimeout, acquireTimeout })\`, which tries again every 10 ms (its default); ` +
      'leasehold-<engine>: a pipeline with a RedisLockStore and `addLock({ ttl, wait, store, limit })`. ' +
      'Wait: from asking to holding. Inside: the two round trips (median); release: from the callback\'s end to the library\'s promise resolving (median); ' +
      `permit idle: ${p.limit} ÷ ops/s − inside − release, the time a permit spends between its release and its next holder's callback (the handover); RTT: each client's PING after its measured part (median). ` +
      'Commands: sent on the process\'s client per completed execution (the two inside included; a library\'s own extra connections, such as a subscriber, not counted). ' +
      `Fleet CPU: the ${p.processes} client processes' user + system time; Redis CPU: the server's; both per completed execution. ` +
      `Each process starts no new execution after ${p.deadlineMs / 1000} s. ${h.roundsOf(p)} rounds.\n\n` +
      h.table(
        ['library', 'ops/s', 'completed', 'wait p50', 'wait p99', 'wait max', 'inside', 'release', 'permit idle', 'RTT', 'commands / execution', 'max holders', 'violations', 'fleet CPU / execution', 'Redis CPU / execution', 'errors', `× ${ref}`, `wait p99 × ${ref}`],
        libs.map((lib) => [
          lib,
          fmtInt(h.med(r[lib], 'opsPerSec')),
          `${fmtInt(h.med(r[lib], 'completed'))} / ${fmtInt(p.processes * p.perProcess)}`,
          fmtMs(h.med(r[lib], 'waitP50')),
          fmtMs(h.med(r[lib], 'waitP99')),
          fmtMs(h.med(r[lib], 'waitMax')),
          fmtMs(h.med(r[lib], 'insideMs')),
          fmtMs(h.med(r[lib], 'releaseMs')),
          fmtMs(h.med(r[lib], 'idleMs')),
          fmtMs(h.med(r[lib], 'rttMs')),
          h.med(r[lib], 'commandsPerOp')?.toFixed(2) ?? '–',
          fmtInt(worst(lib, 'maxHolders')),
          fmtInt(worst(lib, 'violations')),
          fmtMs(h.med(r[lib], 'cpuPerOp')),
          fmtMs(h.med(r[lib], 'redisCpuPerOp')),
          fmtInt(worst(lib, 'errors')),
          fmtRatio(h.ratio(r, lib, ref, 'opsPerSec')),
          fmtRatio(h.ratio(r, lib, ref, 'waitP99')),
        ]),
      ),
  );
  for (const lib of libs.filter(isLeasehold)) {
    const x = h.ratio(r, lib, ref, 'opsPerSec');
    const p99 = h.ratio(r, lib, ref, 'waitP99');
    const v = Math.max(...r[lib].map((o) => o?.violations ?? Infinity));
    h.target('8r', `${lib.slice(10)}: ≥ 2× ${ref}, wait p99 ≤ 0.2× its, 0 violations`, x >= 2 && p99 <= 0.2 && v === 0,
      x === undefined ? notRun(r[lib]) : `${fmtRatio(x)}, wait p99 ${fmtRatio(p99)} of its, ${v} violations`);
  }
  return r;
}

/** One round of 8r for `lib`: the fleet runs, and its numbers are put together. */
async function fleetRound(h, lib, p) {
  const fleet = await startFleet(p.processes, CHILD, { scenario: 'redisWorker', lib, params: p }, {
    env: engineEnv(lib),
    // The contended warm-up and the measured part each stop at the deadline.
    timeoutMs: 2 * p.deadlineMs + 60_000,
  });
  for (const c of fleet) c.go();
  const outs = (await Promise.all(fleet.map((c) => c.result))).map((o) => succeeded(lib, o));
  const redisCpu = (await serverCpuMs(p.port)) - outs.find((o) => o.redisCpuMsAtStart !== undefined).redisCpuMsAtStart;
  const completed = outs.reduce((n, o) => n + o.completed, 0);
  const elapsedMs = Math.max(...outs.map((o) => o.endedAt)) - Math.min(...outs.map((o) => o.startedAt));
  const waits = Float64Array.from(outs.flatMap((o) => o.waits)).sort();
  const at = (q) => waits[Math.min(waits.length - 1, Math.ceil(q * waits.length) - 1)];
  const errors = outs.reduce((n, o) => n + o.errorCount, 0);
  if (errors > 0) h.log(`8r. ${lib}: ${errors} errors, first: ${outs.find((o) => o.errors.length)?.errors[0]}`);
  const opsPerSec = (completed / elapsedMs) * 1000;
  const insideMs = median(outs.map((o) => o.insideP50));
  const releaseMs = median(outs.map((o) => o.releaseP50));
  return {
    opsPerSec,
    // A permit's cycle is limit / throughput: held (inside), being released, and idle
    // (freed until its next holder's callback starts: the handover).
    idleMs: (p.limit * 1000) / opsPerSec - insideMs - releaseMs,
    completed,
    waitP50: at(0.5),
    waitP99: at(0.99),
    waitMax: waits[waits.length - 1],
    violations: outs.reduce((n, o) => n + o.violations, 0),
    maxHolders: Math.max(...outs.map((o) => o.maxHolders)),
    insideMs,
    releaseMs,
    commandsPerOp: outs.reduce((n, o) => n + o.commands, 0) / completed,
    rttMs: median(outs.map((o) => o.rttMs)),
    cpuPerOp: outs.reduce((n, o) => n + o.cpuMs, 0) / completed,
    redisCpuPerOp: redisCpu / completed,
    errors,
  };
}

/** A child's result, or the error that stopped it (a store without permits, say) thrown. */
function succeeded(lib, out) {
  if (out?.failed) throw new Error(`${lib}: ${out.failed}`);
  return out;
}

/** The detail of a target whose library finished no round: the error it ended with. */
function notRun(rounds) {
  return `not measured (${rounds.find((o) => o?.error)?.error ?? 'no result'})`;
}
