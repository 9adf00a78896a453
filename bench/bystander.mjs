// Child process for scenario 7 (bystander cost): what leasehold costs code that does not
// use it. Before Node 24, AsyncLocalStorage propagates through promise hooks, and once
// they are on they stay on for every promise of the process. The child sets up as told,
// then times a promise-heavy workload that never touches leasehold:
//
//   node bench/bystander.mjs '{"setup":"ran","workload":"async-mutex","params":{...}}'
//
// setup:    none      leasehold is not loaded
//           ran       leasehold ran one execution, its token ambient (the default)
//           opted-out leasehold ran one execution built with `ambientToken: false`
// workload: async-mutex  `runExclusive` of an empty async function, sequentially
//           await-loop   an async function awaiting two more, sequentially
// Reports ops per second of wall time and of the process's CPU time (steadier on a
// loaded machine), and whether promise hooks are on (a promise made while they are carries
// Node's async id under a symbol).

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

function promiseHooksOn() {
  return Object.getOwnPropertySymbols(new Promise(() => {})).some((s) => s.description === 'async_id_symbol');
}

async function setUp(setup) {
  if (setup === 'none') return;
  const { ResiliencePipelineBuilder, getLockToken } = require('../lib/entries/index.cjs');
  const pipeline = new ResiliencePipelineBuilder({ ambientToken: setup !== 'opted-out' }).addLock({ key: 'bystander' }).build();
  const token = await pipeline.execute(async (context) => {
    await null;
    return getLockToken(context);
  });
  if (typeof token !== 'number') throw new Error(`the execution got no token: ${token}`);
}

async function step() {
  await null;
  return 1;
}

async function twoSteps() {
  return (await step()) + (await step());
}

function workloadOf(name) {
  if (name === 'async-mutex') {
    const { Mutex } = require('async-mutex');
    const mutex = new Mutex();
    const empty = async () => 0;
    return () => mutex.runExclusive(empty);
  }
  if (name === 'await-loop') return twoSteps;
  throw new Error(`unknown workload ${name}`);
}

async function main({ setup, workload, params: { count, warmup } }) {
  await setUp(setup);
  const run = workloadOf(workload);
  for (let i = 0; i < warmup; i++) await run();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await run();
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  return { opsPerSec: (count / elapsedMs) * 1000, opsPerCpuSec: (count / cpuMs) * 1000, promiseHooks: promiseHooksOn() };
}

const out = await main(JSON.parse(process.argv[2]));
process.stdout.write(`${JSON.stringify(out)}\n`);
