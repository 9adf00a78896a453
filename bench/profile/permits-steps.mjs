// Diagnosis for scenario 8 (permits in memory): what one execution costs, step by step.
//
// Part 1, the host (µs per execution, one process per engine, each shape after a
// warm-up, median of `rounds`): the same callback as scenario 8 (one yield inside) run
//   - bare: `await fn()` with no lock at all (the callback and its await, the floor);
//   - plain, 1 task: a plain lock (`addLock({ key })`), one task: the fast path;
//   - limit 4, 1 task: permits, one task: never waits, but every grant and release goes
//     through the engine (permits are never on the fast path);
//   - limit 4, 4 tasks: as many tasks as permits: never waits, four in flight;
//   - limit 4, 64 tasks: scenario 8 (waiting, woken by the release's handoff);
//   - plain, 64 tasks: scenario 3 (one permit), for comparison;
//   and the best peer of scenario 8 (@henrygd/semaphore) at 1 and 64 tasks.
// Part 2, the binding (µs per call, no host, no promises), a defined lock of limit 4:
//   startDefined granted at once (a free permit), startDefined queued (all 4 taken),
//   finish of a holder handing its permit to the first waiter, and token(waiter).
//
//   LEASEHOLD_ENGINE=native node bench/profile/permits-steps.mjs [count=64000] [rounds=3]
// (part 2 runs both engines whatever LEASEHOLD_ENGINE says)

import { createRequire } from 'node:module';
import { median } from '../support/stats.mjs';

const require = createRequire(import.meta.url);
const COUNT = Number(process.argv[2] ?? 64_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const api = (await import('../../lib/entries/index.mjs')).default;
const { getSemaphore } = await import('@henrygd/semaphore');

const body = async () => {
  await null;
};

/** µs per execution of `run(body)` by `tasks` tasks sharing `count` executions. */
async function perExecution(run, tasks, count = COUNT) {
  let left = count;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: tasks }, async () => {
      while (left > 0) {
        left -= 1;
        await run(body);
      }
    }),
  );
  return ((performance.now() - t0) * 1000) / count;
}

const pipeline = (options) => {
  const p = new api.ResiliencePipelineBuilder().addLock({ ttl: 30_000, wait: Infinity, ...options }).build();
  return (fn) => p.execute(fn);
};
const semaphore = (key, limit) => {
  const s = getSemaphore(key, limit);
  return async (fn) => {
    await s.acquire();
    try {
      return await fn();
    } finally {
      s.release();
    }
  };
};

const shapes = [
  ['bare (no lock)', () => (fn) => fn(), 1],
  ['plain, 1 task', () => pipeline({ key: 'plain:1' }), 1],
  ['limit 4, 1 task', () => pipeline({ key: 'limit:1', limit: 4 }), 1],
  ['limit 4, 4 tasks', () => pipeline({ key: 'limit:4', limit: 4 }), 4],
  ['limit 4, 64 tasks (scenario 8)', () => pipeline({ key: 'limit:64', limit: 4 }), 64],
  ['plain, 64 tasks (scenario 3)', () => pipeline({ key: 'plain:64' }), 64],
  ['@henrygd/semaphore(4), 1 task', () => semaphore('h:1', 4), 1],
  ['@henrygd/semaphore(4), 64 tasks', () => semaphore('h:64', 4), 64],
];

console.log(`Part 1: µs per execution, ${api.engine} engine (median of ${ROUNDS} rounds of ${COUNT}, after one of warm-up)`);
for (const [name, make, tasks] of shapes) {
  const run = make();
  await perExecution(run, tasks);
  const us = [];
  for (let r = 0; r < ROUNDS; r++) us.push(await perExecution(run, tasks));
  console.log(`${name.padEnd(36)} ${median(us).toFixed(3).padStart(8)}`);
}

// ---- part 2: the binding ------------------------------------------------------------

const { STORE_MEMORY: MEMORY, OPTION_RENEW: RENEW, STARTED_RUNNING, statusOf, resultOf, payloadOf, finishHandsOff, EFFECTS } = require('../../lib/host/protocol.cjs');
const { withFastCalls } = require('../../lib/host/fast-calls.cjs');
const FOREVER = -1;
const N = Math.min(COUNT, 50_000);

function check(ok, what) {
  if (!ok) throw new Error(`unexpected: ${what}`);
}

function binding(load) {
  const engine = new (load().Engine)(false, 0, new Uint8Array(32));
  const store = engine.createMemoryStore();
  const lock = engine.defineLock(MEMORY, store, 'bench:permits', 30_000, FOREVER, '', 4, 1);
  check(lock >= 0, `defineLock returned ${lock}`);
  let id = 1;
  const t = { granted: 0, queued: 0, handoff: 0, token: 0 };
  // Four holders, each granted at once.
  const holders = [];
  for (let i = 0; i < 4; i++) {
    const exec = id++;
    const a = performance.now();
    const word = engine.startDefined(exec, RENEW, lock);
    t.granted += performance.now() - a;
    check(resultOf(statusOf(word)) === STARTED_RUNNING, `startDefined status ${word}`);
    holders.push(exec);
  }
  // Granted at once, repeated: a fifth permit is never free, so release one and take it again.
  for (let i = 0; i < N; i++) {
    engine.finish(holders.shift(), true, true);
    const exec = id++;
    const a = performance.now();
    const word = engine.startDefined(exec, RENEW, lock);
    t.granted += performance.now() - a;
    check(resultOf(statusOf(word)) === STARTED_RUNNING, `startDefined status ${word}`);
    if (word & EFFECTS) engine.takeEffects();
    holders.push(exec);
  }
  // Steady state of scenario 8: 4 holders and a queue; the oldest holder finishes and
  // hands its permit to the first waiter, and a new waiter queues.
  const waiters = [];
  for (let i = 0; i < 4; i++) {
    const exec = id++;
    check(resultOf(engine.startDefined(exec, RENEW, lock)) === 0, 'waiter not queued');
    waiters.push(exec);
  }
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const word = engine.finish(holders.shift(), true, true);
    const b = performance.now();
    check(finishHandsOff(statusOf(word)) && payloadOf(word) === waiters[0] && !(word & EFFECTS), `finish status ${word} (waiter ${waiters[0]})`);
    const next = waiters.shift();
    const token = engine.token(next);
    const c = performance.now();
    check(typeof token === 'number', `token ${token}`);
    holders.push(next);
    const exec = id++;
    const d = performance.now();
    const queued = engine.startDefined(exec, RENEW, lock);
    const e = performance.now();
    check(resultOf(queued) === 0 && payloadOf(queued) === 0, `queued start status ${queued}`);
    if (queued & EFFECTS) engine.takeEffects();
    waiters.push(exec);
    t.handoff += b - a;
    t.token += c - b;
    t.queued += e - d;
  }
  let clock = 0;
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    clock += performance.now() - a;
  }
  const us = (v, n) => ((v - (clock * n) / N) / n) * 1000;
  return { granted: us(t.granted, N + 4), queued: us(t.queued, N), handoff: us(t.handoff, N), token: us(t.token, N) };
}

const loaders = {
  native: () => withFastCalls(require('../../lib/entries/native.cjs').load()),
  wasm: () => withFastCalls(require('../../lib/entries/wasm-node.cjs').load()),
};
const results = { native: [], wasm: [] };
for (let r = 0; r < ROUNDS; r++) for (const [name, load] of Object.entries(loaders)) results[name].push(binding(load));
console.log(`\nPart 2: µs per binding call, a defined lock of limit 4 (median of ${ROUNDS} rounds of ${N}, timestamp cost subtracted)`);
const names = {
  granted: 'startDefined (a permit free: granted)',
  queued: 'startDefined (all 4 taken: queued)',
  handoff: 'finish, handing the permit to a waiter',
  token: 'token(waiter)',
};
console.log(`${'call'.padEnd(40)} ${'native'.padStart(8)} ${'wasm'.padStart(8)}`);
for (const [k, name] of Object.entries(names)) {
  const m = (e) => median(results[e].map((x) => x[k])).toFixed(2);
  console.log(`${name.padEnd(40)} ${m('native').padStart(8)} ${m('wasm').padStart(8)}`);
}
