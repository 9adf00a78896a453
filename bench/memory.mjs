// Child process for the in-process scenarios (1-3). The orchestrator (run.mjs) starts
// one per library and round, or one for several libraries in a row (the "in-process"
// comparison), and reads one JSON line from stdout:
//
//   node --expose-gc bench/memory.mjs '{"scenario":"uncontended","libs":["floor"],"params":{...}}'
//
// Every loop is bounded by its count and by a deadline.

import { setImmediate as turn } from 'node:timers/promises';
import { createMemoryLock, engineEntries } from './adapters/memory.mjs';
import { gaps, quantiles } from './support/stats.mjs';

const noop = async () => 0;

/** Scenario 1: `count` sequential executions on one key. */
async function uncontended(lib, { count, warmup }) {
  const run = await createMemoryLock(lib, { singleKey: 'bench:uncontended' });
  for (let i = 0; i < warmup; i++) await run('bench:uncontended', noop);
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await run('bench:uncontended', noop);
    stamps[i + 1] = performance.now();
  }
  const elapsedMs = stamps[count] - stamps[0];
  const { p50, p99 } = quantiles(gaps(stamps, count));
  return { opsPerSec: (count / elapsedMs) * 1000, meanMs: elapsedMs / count, p50, p99 };
}

async function settleAndCollect() {
  // Let pending immediates and microtasks run (leasehold unrefs its timer on the next
  // turn), then collect twice so that weak and finalised objects are gone too.
  await turn();
  await turn();
  globalThis.gc();
  await turn();
  globalThis.gc();
  return process.memoryUsage();
}

/** Scenario 2: `count` distinct keys once each; what stays on the heap afterwards. */
async function manyKeys(lib, { count, warmup }) {
  if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc');
  const run = await createMemoryLock(lib, {});
  for (let i = 0; i < warmup; i++) await run(`warm:${i}`, noop);
  const before = await settleAndCollect();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await run(`key:${i}`, noop);
  const elapsedMs = performance.now() - t0;
  const after = await settleAndCollect();
  const perKey = (field) => (after[field] - before[field]) / count;
  return {
    opsPerSec: (count / elapsedMs) * 1000,
    heapPerKey: perKey('heapUsed'),
    externalPerKey: perKey('external'),
    retainedPerKey: perKey('heapUsed') + perKey('external'),
    rssPerKey: perKey('rss'),
    engineEntries: await engineEntries(lib),
  };
}

/**
 * One pass of scenario 3: `tasks` tasks each acquiring the lock `perTask` times,
 * yielding once (a microtask) while holding. Checks exclusion (holders never above 1)
 * and FIFO order (tickets handed out at request time are granted in increasing order),
 * and measures the handoff: from a holder's callback returning to the next holder's
 * callback starting.
 */
async function contentionPass(run, { tasks, perTask, deadlineMs }) {
  const handoffs = new Float64Array(tasks * perTask);
  let handoffCount = 0;
  let holders = 0;
  let overlaps = 0;
  let nextTicket = 0;
  let lastGranted = -1;
  let outOfOrder = 0;
  let releasedAt = -1;
  let completed = 0;
  let stop = false;
  const t0 = performance.now();
  const deadline = t0 + deadlineMs;
  async function task() {
    for (let i = 0; i < perTask && !stop; i++) {
      const ticket = nextTicket++;
      await run('bench:contention', async () => {
        const start = performance.now();
        holders += 1;
        if (holders > 1) overlaps += 1;
        if (ticket < lastGranted) outOfOrder += 1;
        lastGranted = ticket;
        if (releasedAt >= 0) handoffs[handoffCount++] = start - releasedAt;
        await null; // the one yield while holding
        holders -= 1;
        completed += 1;
        releasedAt = performance.now();
        if (releasedAt > deadline) stop = true;
      });
    }
  }
  await Promise.all(Array.from({ length: tasks }, task));
  const elapsedMs = performance.now() - t0;
  const { p50, p99 } = quantiles(handoffs, handoffCount);
  return { opsPerSec: (completed / elapsedMs) * 1000, completed, p50, p99, outOfOrder, overlaps };
}

/**
 * Scenario 3: the same pass twice in one fresh process, on one lock. The first ("cold")
 * is what a process sees while V8 is still compiling the code on the path; the second
 * ("warm") is the steady state, as scenarios 1, 2 and 4 measure after their warm-up.
 * FIFO and exclusion count over both passes.
 */
async function contention(lib, params) {
  const run = await createMemoryLock(lib, { singleKey: 'bench:contention', wait: Infinity });
  const cold = await contentionPass(run, params);
  const warm = await contentionPass(run, params);
  const planned = params.tasks * params.perTask;
  return {
    opsPerSec: warm.opsPerSec,
    completed: warm.completed,
    planned,
    timedOut: warm.completed < planned || cold.completed < planned,
    handoffP50: warm.p50,
    handoffP99: warm.p99,
    coldOpsPerSec: cold.opsPerSec,
    coldHandoffP50: cold.p50,
    coldHandoffP99: cold.p99,
    outOfOrder: cold.outOfOrder + warm.outOfOrder,
    overlaps: cold.overlaps + warm.overlaps,
  };
}

const SCENARIOS = { uncontended, manyKeys, contention };

const { scenario, libs, params } = JSON.parse(process.argv[2]);
const results = {};
for (const lib of libs) results[lib] = await SCENARIOS[scenario](lib, params);
process.stdout.write(`${JSON.stringify(results)}\n`);
