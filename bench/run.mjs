// `npm run bench`: leasehold (native and wasm engines) side by side with the libraries
// people use today, each in its fastest supported build, and a hand-written floor, in
// one run. Prints markdown tables; a full run keeps them in bench/results/node<major>.md
// (bench/RESULTS.md, written by hand, reads them).
//
//   node bench/run.mjs [--node=24] [--only=1,3,5] [--rounds=N] [--quick] [--no-write] [--etcd-only]
//
// `--node=24` runs the whole bench on Node 24 (installed by npm into bench/node24).
// Scenarios 1-6 are issue 20's; 4b (run with 4) is scenario 4 on a different key every
// execution; 4r (run with 4) is scenario 4 on a primary with a replica, with and without
// `minReplicas: 1`; 5b and 5c (run with 5) are scenario 5 with 1 ms of other work between a
// process's executions, and with 8 concurrent executions in each process. Scenario 7
// (bystander cost) times code that never uses leasehold, in a process where it ran.
// `--node=22` runs on Node 22 (bench/node22), for scenario 7's AsyncContextFrame flag.
// Scenario 8 (permits, bench/scenario-permits.mjs): 8 in memory and 8r on Redis;
// `--only=8 --permits=memory|redis` runs one of them.
// Scenarios 4 and 5 also run on etcd (4e, 5e: leasehold against etcd3's own lock()),
// when `etcd` is installed; `--etcd-only` runs just those.
//
// Each library runs each scenario in its own child process (on Node 20, a library run
// after leasehold in the same process pays for the promise hooks that leasehold's
// AsyncLocalStorage turns on; the in-process table shows it), interleaved: round r runs every library once, in an
// order rotated by r. Tables show medians over rounds; a ratio is the median of the
// per-round ratios (both sides measured in the same round). Bounded: counts are fixed,
// every child has a deadline and a timeout, and the Redis servers are our own, on
// loopback, stopped at the end.

import { execFileSync, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.dirname(BENCH);
const started = performance.now();

// ---- options ------------------------------------------------------------------------

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(`--${name}`);
const option = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const quick = flag('quick');
const only = option('only')?.split(',').map(Number);
const roundsOverride = option('rounds') === undefined ? undefined : Number(option('rounds'));
const etcdOnly = flag('etcd-only');
// A full run writes results/node<major>.md; `--only=8` alone, results/node<major>-permits.md.
const permitsOnly = only?.length === 1 && only[0] === 8;
const write = !flag('no-write') && !quick && (only === undefined || (permitsOnly && roundsOverride === undefined)) && !etcdOnly;
const loadAtStart = os.loadavg();

function log(message) {
  process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(3)} s] ${message}\n`);
}

// ---- setup: peers installed, engines built ------------------------------------------

function ensureInstalled() {
  // Installed, and not older than the lock file (a peer added since is installed too).
  const installed = path.join(BENCH, 'node_modules', '.package-lock.json');
  if (existsSync(installed) && statSync(installed).mtimeMs >= statSync(path.join(BENCH, 'package-lock.json')).mtimeMs) return;
  log('installing the peers (npm --prefix bench ci)');
  // Its output goes to stderr: stdout carries the report.
  const r = spawnSync('npm', ['--prefix', BENCH, 'ci', '--no-audit', '--no-fund'], { stdio: ['ignore', 2, 2] });
  if (r.status !== 0) throw new Error('npm --prefix bench ci failed');
}

function engineFiles() {
  const addon = execFileSync(process.execPath, ['-e', 'process.stdout.write(require("./lib/entries/native.cjs").addonFile())'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return { native: path.join(ROOT, 'dist', addon), wasm: path.join(ROOT, 'dist', 'wasm', 'leasehold_wasm.cjs') };
}

function ensureBuilt() {
  let files = engineFiles();
  if (!existsSync(files.native) || !existsSync(files.wasm)) {
    log('building the engines (bash scripts/build.sh)');
    spawnSync('bash', ['scripts/build.sh'], { cwd: ROOT, stdio: ['ignore', 2, 2] });
    files = engineFiles();
  }
  const engines = ['native', 'wasm'].filter((e) => existsSync(files[e]));
  if (engines.length < 2) log(`only these engines are built: ${engines.join(', ') || 'none'}`);
  return engines;
}

/**
 * `--node=N` when this is not Node N: installs Node N into bench/node<N> (its own
 * package, out of the root devDependencies: the npm `node` package links a `node`
 * binary into node_modules/.bin) and runs this script on it with the other options.
 */
function runOnRequestedNode() {
  const wantedMajor = option('node');
  if (wantedMajor === undefined || process.versions.node.split('.')[0] === wantedMajor) return;
  const prefix = path.join(BENCH, `node${wantedMajor}`);
  if (!existsSync(path.join(prefix, 'package.json'))) throw new Error(`--node=${wantedMajor}: no bench/node${wantedMajor}/package.json`);
  const binary = path.join(prefix, 'node_modules', 'node', 'bin', 'node');
  if (!existsSync(binary)) {
    log(`installing Node ${wantedMajor} (npm --prefix bench/node${wantedMajor} ci)`);
    const r = spawnSync('npm', ['--prefix', prefix, 'ci', '--no-audit', '--no-fund'], { stdio: ['ignore', 2, 2] });
    if (r.status !== 0) throw new Error(`npm --prefix bench/node${wantedMajor} ci failed`);
  }
  const r = spawnSync(binary, [fileURLToPath(import.meta.url), ...argv], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

runOnRequestedNode();
ensureInstalled();
const engines = ensureBuilt();
const { median, fmtInt, fmtMs, fmtRatio, fmtBytes } = await import('./support/stats.mjs');
const { engineEnv, startFleet, runChild } = await import('./support/children.mjs');
const { startRedisServer } = await import('../js-tests/support/redis.mjs');
const { serverCpuMs } = await import('./support/redis-client.mjs');

// 'leasehold-<engine>' and variants such as 'leasehold-native-fifo'.
const engineOf = (lib) => lib.split('-')[1];
const available = (lib) => !lib.startsWith('leasehold-') || engines.includes(engineOf(lib));
const MEMORY_CHILD = path.join(BENCH, 'memory.mjs');
const REDIS_CHILD = path.join(BENCH, 'redis.mjs');
const MEMORY_LIBS = ['floor', 'async-mutex', 'async-sema', 'henrygd-semaphore', 'verrou', 'leasehold-native', 'leasehold-wasm'].filter(available);
const REDIS_LIBS = ['floor', 'redlock', 'redis-semaphore', 'verrou', 'leasehold-native', 'leasehold-wasm'].filter(available);
// Scenarios 4 and 5 also run leasehold with `linger` (the turn, 10 ms).
const LINGER_LIBS = ['leasehold-native-linger', 'leasehold-wasm-linger'].filter(available);
const isLinger = (lib) => lib.endsWith('-linger');
const isPeer = (lib) => !lib.startsWith('floor') && !lib.startsWith('leasehold-');
// Scenario 1 also runs leasehold's other two forms: the key per execution
// (`operationKey`) and `withLock(key, fn)`; and the first with `ambientToken: false`.
const UNCONTENDED_LIBS = [
  ...MEMORY_LIBS,
  ...['leasehold-native-opkey', 'leasehold-wasm-opkey', 'leasehold-native-withlock', 'leasehold-wasm-withlock'].filter(available),
  ...['leasehold-native-noambient', 'leasehold-wasm-noambient'].filter(available),
];

/**
 * Which file each peer ran: the adapters load async-mutex with `require` (its CommonJS
 * build; `import` would get its slower ESM build) and the others with `import`, which
 * resolves to each one's only build.
 */
function peerBuilds() {
  const fromAdapters = path.join(BENCH, 'adapters', 'memory.mjs');
  const requireHere = createRequire(fromAdapters);
  const relative = (file) => path.relative(path.join(BENCH, 'node_modules'), file.startsWith('file:') ? fileURLToPath(file) : file);
  const resolve = (name, how) => {
    try {
      return relative(how === 'require' ? requireHere.resolve(name) : import.meta.resolve(name));
    } catch {
      return '?';
    }
  };
  return [
    ['async-mutex', 'require', 'CommonJS, generators down-levelled by tslib', 'ESM build (index.mjs, native generators under `__awaiter`), about 4× slower: what `import` gets'],
    ['async-sema', 'require', 'CommonJS', 'none'],
    ['@henrygd/semaphore', 'import', 'ESM (dist/index.js)', 'CommonJS (dist/index.cjs), the same code'],
    ['@sesamecare-oss/redlock', 'import', 'CommonJS', 'none'],
    ['redis-semaphore', 'import', 'CommonJS', 'none'],
    ['@verrou/core', 'import', 'ESM', 'none'],
    ['etcd3', 'import', 'CommonJS', 'none'],
  ].map(([name, how, kind, others]) => [`${name} ${version(name)}`, `\`${how}\``, `${resolve(name, how)} (${kind})`, others]);
}

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const rotate = (list, by) => list.map((_, i) => list[(i + by) % list.length]);

// ---- scenario definitions -----------------------------------------------------------

const S = quick
  ? {
      uncontended: { count: 20_000, warmup: 2_000, rounds: 2 },
      manyKeys: { count: 20_000, warmup: 1_000, rounds: 2 },
      contention: { tasks: 64, perTask: 100, deadlineMs: 3_000, rounds: 2 },
      inprocess: { rounds: 1 },
      redisUncontended: { count: 2_000, warmup: 200, ttlMs: 10_000, rounds: 1 },
      redisManyKeys: { count: 2_000, warmup: 200, ttlMs: 10_000, keys: 10_000, rounds: 1 },
      redisContended: { processes: 8, perProcess: 50, warmup: 50, contendedWarmup: 20, deadlineMs: 3_000, ttlMs: 10_000, waitMs: 60_000, rounds: 1 },
      restart: { ttlMs: 1_500, offsets: [30] },
    }
  : {
      uncontended: { count: 200_000, warmup: 20_000, rounds: 5 },
      manyKeys: { count: 100_000, warmup: 2_000, rounds: 3 },
      contention: { tasks: 64, perTask: 1_000, deadlineMs: 8_000, rounds: 3 },
      inprocess: { rounds: 3 },
      redisUncontended: { count: 20_000, warmup: 1_000, ttlMs: 10_000, rounds: 5 },
      redisManyKeys: { count: 20_000, warmup: 1_000, ttlMs: 10_000, keys: 10_000, rounds: 3 },
      redisContended: { processes: 8, perProcess: 500, warmup: 1_000, contendedWarmup: 1_000, deadlineMs: 6_000, ttlMs: 10_000, waitMs: 60_000, rounds: 3 },
      restart: { ttlMs: 1_500, offsets: [30, 530, 1_030] },
    };
// 4e and 5e: scenarios 4 and 5 on etcd (smaller counts: every lock is a write through consensus).
S.etcdUncontended = quick ? { count: 200, warmup: 20, ttlMs: 10_000, rounds: 1 } : { count: 2_000, warmup: 200, ttlMs: 10_000, rounds: 5 };
S.etcdContended = quick
  ? { processes: 8, perProcess: 20, warmup: 10, contendedWarmup: 5, deadlineMs: 5_000, ttlMs: 10_000, waitMs: 60_000, rounds: 1 }
  : { processes: 8, perProcess: 100, warmup: 50, contendedWarmup: 20, deadlineMs: 8_000, ttlMs: 10_000, waitMs: 60_000, rounds: 3 };
// 7: a workload that does not use leasehold, in a process where it ran or not.
S.bystander = quick ? { count: 100_000, warmup: 10_000, rounds: 2 } : { count: 300_000, warmup: 30_000, rounds: 9 };
// 5b: scenario 5 with 1 ms of other work between a process's executions.
S.redisThink = { ...S.redisContended, thinkMs: 1, rounds: quick ? 1 : 2 };
// 5c: scenario 5 with 8 concurrent executions in each process (64 contenders).
S.redisConcurrent = { ...S.redisContended, concurrency: 8, rounds: quick ? 1 : 2 };
const roundsOf = (s) => roundsOverride ?? s.rounds;
const wanted = (n) => !etcdOnly && (only === undefined || only.includes(n));
const wantedOnEtcd = (n) => only === undefined || only.includes(n);

/** Runs `measure(lib, round)` for every lib, interleaved over rounds; results[lib][round]. */
async function interleave(libs, rounds, measure) {
  const results = Object.fromEntries(libs.map((lib) => [lib, []]));
  for (let round = 0; round < rounds; round++) {
    for (const lib of rotate(libs, round)) {
      try {
        results[lib][round] = await measure(lib, round);
      } catch (error) {
        // The first line names the child; the child's own error is at the end of its stderr.
        const lines = error.message.split('\n').filter((line) => line.trim() !== '' && !/^\s+at /.test(line));
        log(`${lib} failed in round ${round + 1}: ${[lines[0], ...lines.slice(1).slice(-3)].join('\n    ')}`);
        results[lib][round] = { error: error.message.split('\n')[0] };
      }
    }
  }
  return results;
}

/** Median of one field over rounds. */
const med = (runs, field) => median(runs.map((r) => r?.[field]));

/** Median over rounds of lib/ref for `field` (both from the same round). */
function ratio(results, lib, ref, field) {
  if (!ref || !results[ref]) return undefined;
  return median(results[lib].map((r, i) => r?.[field] / results[ref][i]?.[field]));
}

/** The peer with the best median of `field` (higher is better unless `lower`). */
function bestPeer(results, field, { lower = false } = {}) {
  let best;
  for (const lib of Object.keys(results).filter(isPeer)) {
    const v = med(results[lib], field);
    if (v === undefined) continue;
    if (best === undefined || (lower ? v < best.v : v > best.v)) best = { lib, v };
  }
  return best?.lib;
}

function table(headers, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  return [line(headers), line(headers.map((h, i) => (i === 0 ? '---' : '---:'))), ...rows.map(line)].join('\n');
}

const sections = [];
const targets = [];
function target(scenario, text, met, detail) {
  targets.push({ scenario, text, met, detail });
}

// ---- 1. memory, uncontended ---------------------------------------------------------

async function memoryChild(scenario, libs, params, { env = engineEnv(libs[0]), timeoutMs = 120_000 } = {}) {
  return runChild(MEMORY_CHILD, { scenario, libs, params }, { env, nodeArgs: ['--expose-gc'], timeoutMs });
}

let perProcessUncontended;
if (wanted(1)) {
  const p = S.uncontended;
  log(`1. memory, uncontended: ${p.count} sequential executions, ${roundsOf(p)} rounds`);
  const r = await interleave(UNCONTENDED_LIBS, roundsOf(p), async (lib) => (await memoryChild('uncontended', [lib], p))[lib]);
  perProcessUncontended = r;
  const best = bestPeer(r, 'opsPerSec');
  sections.push(
    `### 1. Memory, uncontended: ${fmtInt(p.count)} sequential executions on one key\n\n` +
      'leasehold-*: the key defined with the lock (`addLock({ key })`); -opkey: the key per execution (`operationKey`); -withlock: `withLock(key, fn)`; -noambient: the first with `ambientToken: false`.\n\n' +
      table(
        ['library', 'ops/s', 'mean', 'p50', 'p99', '× floor', `× best peer (${best})`],
        UNCONTENDED_LIBS.map((lib) => [
          lib,
          fmtInt(med(r[lib], 'opsPerSec')),
          fmtMs(med(r[lib], 'meanMs')),
          fmtMs(med(r[lib], 'p50')),
          fmtMs(med(r[lib], 'p99')),
          fmtRatio(ratio(r, lib, 'floor', 'opsPerSec')),
          fmtRatio(ratio(r, lib, best, 'opsPerSec')),
        ]),
      ),
  );
  // The bar is the fastest peer of the run. Before Node 24, promise hooks (which
  // AsyncLocalStorage turns on) cost more than the whole peer: there the bar is for
  // `ambientToken: false`, and the default forms are reported without one.
  const hooked = NODE_MAJOR < 24;
  for (const lib of UNCONTENDED_LIBS.filter((l) => l.startsWith('leasehold-'))) {
    if (hooked && !lib.endsWith('-noambient')) continue;
    const x = ratio(r, lib, best, 'opsPerSec');
    if (x !== undefined) target(1, `${lib.slice(10)}: ≥ 1.0× the best peer (${best}, ops/s)`, x >= 1, fmtRatio(x));
  }
}

// ---- 2. memory, many keys -----------------------------------------------------------

if (wanted(2)) {
  const p = S.manyKeys;
  log(`2. memory, many keys: ${p.count} distinct keys, ${roundsOf(p)} rounds`);
  const r = await interleave(MEMORY_LIBS, roundsOf(p), async (lib) => (await memoryChild('manyKeys', [lib], p))[lib]);
  const best = bestPeer(r, 'opsPerSec');
  sections.push(
    `### 2. Memory, many keys: ${fmtInt(p.count)} distinct keys, once each\n\n` +
      'Retained = JS heap + external memory after GC, minus the same before, per key (wasm linear memory counts as external). ' +
      'RSS is noisier (the allocator keeps freed pages). Engine entries: keys the leasehold engine still stores.\n\n' +
      table(
        ['library', 'ops/s', 'retained / key', 'heap / key', 'external / key', 'RSS / key', 'engine entries', '× floor (ops/s)', `× best peer (${best})`],
        MEMORY_LIBS.map((lib) => [
          lib,
          fmtInt(med(r[lib], 'opsPerSec')),
          fmtBytes(med(r[lib], 'retainedPerKey')),
          fmtBytes(med(r[lib], 'heapPerKey')),
          fmtBytes(med(r[lib], 'externalPerKey')),
          fmtBytes(med(r[lib], 'rssPerKey')),
          med(r[lib], 'engineEntries') ?? '–',
          fmtRatio(ratio(r, lib, 'floor', 'opsPerSec')),
          fmtRatio(ratio(r, lib, best, 'opsPerSec')),
        ]),
      ),
  );
  for (const lib of MEMORY_LIBS.filter((l) => l.startsWith('leasehold-'))) {
    const retained = med(r[lib], 'retainedPerKey');
    target(2, `${lib.slice(10)}: ≤ 3 bytes retained per key`, retained <= 3, `${fmtBytes(retained)} per key`);
  }
}

// ---- 3. memory, contention ----------------------------------------------------------

let perProcessContention;
if (wanted(3)) {
  const p = S.contention;
  log(`3. memory, contention: ${p.tasks} tasks × ${p.perTask}, ${roundsOf(p)} rounds`);
  const r = await interleave(MEMORY_LIBS, roundsOf(p), async (lib) =>
    (await memoryChild('contention', [lib], p, { timeoutMs: p.deadlineMs + 60_000 }))[lib],
  );
  perProcessContention = r;
  const best = bestPeer(r, 'opsPerSec');
  sections.push(
    `### 3. Memory, contention: ${p.tasks} tasks × ${fmtInt(p.perTask)} acquisitions of one key, one yield inside\n\n` +
      `Each process runs the scenario twice on one lock: a cold pass, while V8 is still compiling the code on the path, then the measured warm pass ` +
      '(scenarios 1, 2 and 4 likewise measure after a warm-up). ' +
      `Handoff: from a holder's callback returning to the next holder's callback starting. Out-of-order: grants whose request came before the previous grant's; ` +
      `it and overlapping holders count both passes. Stopped at ${p.deadlineMs / 1000} s per pass when not done (completed < planned).\n\n` +
      table(
        ['library', 'ops/s', 'completed', 'handoff p50', 'handoff p99', 'cold: ops/s', 'cold: handoff p99', 'out-of-order grants', 'overlapping holders', '× floor (ops/s)', `× best peer (${best})`],
        MEMORY_LIBS.map((lib) => [
          lib,
          fmtInt(med(r[lib], 'opsPerSec')),
          `${fmtInt(med(r[lib], 'completed'))} / ${fmtInt(p.tasks * p.perTask)}`,
          fmtMs(med(r[lib], 'handoffP50')),
          fmtMs(med(r[lib], 'handoffP99')),
          fmtInt(med(r[lib], 'coldOpsPerSec')),
          fmtMs(med(r[lib], 'coldHandoffP99')),
          fmtInt(Math.max(...r[lib].map((x) => x?.outOfOrder ?? NaN))),
          fmtInt(Math.max(...r[lib].map((x) => x?.overlaps ?? NaN))),
          fmtRatio(ratio(r, lib, 'floor', 'opsPerSec')),
          fmtRatio(ratio(r, lib, best, 'opsPerSec')),
        ]),
      ),
  );
  for (const lib of MEMORY_LIBS.filter((l) => l.startsWith('leasehold-'))) {
    const name = lib.slice(10);
    const fifo = Math.max(...r[lib].map((x) => x?.outOfOrder ?? Infinity));
    const overlaps = Math.max(...r[lib].map((x) => x?.overlaps ?? Infinity));
    const x = ratio(r, lib, best, 'opsPerSec');
    const p99 = med(r[lib], 'handoffP99');
    target(3, `${name}: ≥ 1.0× the best peer's ops/s (${best}, warm pass)`, x >= 1, fmtRatio(x));
    target(3, `${name}: handoff p99 ≤ 2 µs (warm pass)`, p99 <= 0.002, `${fmtMs(p99)} (${best}: ${fmtMs(med(r[best], 'handoffP99'))})`);
    target(3, `${name}: strictly FIFO, 0 overlapping holders`, fifo === 0 && overlaps === 0, `${fifo} out of order, ${overlaps} overlaps`);
  }
}

// ---- in-process vs per-process ------------------------------------------------------

if (wanted(1) && wanted(3) && engines.includes('native')) {
  const p = S.inprocess;
  const libs = ['leasehold-native', 'floor', 'async-mutex'];
  log(`in-process comparison: ${libs.join(', ')} in one process, ${roundsOf(p)} rounds`);
  const one = await interleave(['uncontended', 'contention'], roundsOf(p), (scenario) =>
    memoryChild(scenario, libs, scenario === 'uncontended' ? S.uncontended : S.contention, { env: { LEASEHOLD_ENGINE: 'native' } }),
  );
  const rows = [];
  for (const [scenario, perProcess, field] of [
    ['uncontended', perProcessUncontended, 'opsPerSec'],
    ['contention', perProcessContention, 'opsPerSec'],
    ['contention', perProcessContention, 'handoffP99'],
  ]) {
    for (const lib of libs) {
      const inProc = median(one[scenario].map((x) => x?.[lib]?.[field]));
      const perProc = med(perProcess[lib], field);
      const fmt = field === 'opsPerSec' ? fmtInt : fmtMs;
      rows.push([`${scenario === 'uncontended' ? '1' : '3'}. ${field === 'opsPerSec' ? 'ops/s' : 'handoff p99'}`, lib, fmt(perProc), fmt(inProc), fmtRatio(inProc / perProc)]);
    }
  }
  sections.push(
    '### In-process vs per-process (scenarios 1 and 3)\n\n' +
      `The tables above run each library in its own process. Here one process runs ${libs.join(', then ')} in a row ` +
      '(as a single-process benchmark would): leasehold\'s AsyncLocalStorage has by then enabled promise hooks for the whole process (Node 20), ' +
      'and every library after it pays for them. Medians of the per-process rounds above and of the in-process rounds.\n\n' +
      table(['measure', 'library', 'own process', 'after leasehold, same process', 'same / own'], rows),
  );
}

// ---- 7. bystander cost --------------------------------------------------------------

if (wanted(7) && engines.includes('native')) {
  const p = S.bystander;
  const major = NODE_MAJOR;
  // Node 22 has AsyncContextFrame behind a flag: 'ran, frame' runs with it.
  const setups = ['none', 'ran', 'opted-out', ...(major === 22 ? ['ran, frame'] : [])];
  const workloads = ['async-mutex', 'await-loop'];
  const variants = workloads.flatMap((workload) => setups.map((setup) => `${workload} / ${setup}`));
  log(`7. bystander cost: ${workloads.join(', ')} × ${setups.join(', ')}, ${p.count} operations, ${roundsOf(p)} rounds`);
  const r = await interleave(variants, roundsOf(p), (variant) => {
    const [workload, setup] = variant.split(' / ');
    const nodeArgs = setup === 'ran, frame' ? ['--experimental-async-context-frame'] : [];
    return runChild(
      path.join(BENCH, 'bystander.mjs'),
      { setup: setup.split(',')[0], workload, params: p },
      { env: { LEASEHOLD_ENGINE: 'native' }, nodeArgs, timeoutMs: 120_000 },
    );
  });
  const rows = variants.map((variant) => {
    const workload = variant.split(' / ')[0];
    const none = `${workload} / none`;
    return [
      variant,
      fmtInt(med(r[variant], 'opsPerSec')),
      fmtInt(med(r[variant], 'opsPerCpuSec')),
      r[variant].some((x) => x?.promiseHooks) ? 'on' : 'off',
      fmtRatio(ratio(r, variant, none, 'opsPerCpuSec')),
      fmtRatio(ratio(r, variant, none, 'opsPerSec')),
    ];
  });
  sections.push(
    `### 7. Bystander cost: code that does not use leasehold, in a process where it ran (Node ${major})\n\n` +
      `Each child times ${fmtInt(p.count)} sequential operations of a workload that never touches leasehold (after ${fmtInt(p.warmup)} of warm-up): ` +
      "async-mutex's `runExclusive` of an empty async function (its CommonJS build), or an async function awaiting two others. " +
      'Before it, leasehold (native) was not loaded (none), ran one execution with the default ambient token (ran), or one built with `ambientToken: false` (opted-out)' +
      (major === 22 ? '; "ran, frame": ran, on Node 22 with `--experimental-async-context-frame`' : '') +
      '. Promise hooks: on when a new promise carries an async id (AsyncLocalStorage without AsyncContextFrame turns them on for the whole process). ' +
      'ops per CPU-second: per second of the process\'s own CPU time, which another process\'s load moves less than the wall clock. ' +
      `× none: the median of per-round ratios to the same workload with nothing loaded. ${roundsOf(p)} rounds.\n\n` +
      table(['workload / setup', 'ops/s', 'ops per CPU-second', 'promise hooks', '× none (CPU)', '× none (wall)'], rows),
  );
}

// ---- Redis scenarios ----------------------------------------------------------------

let redis;

/** Resolves once the server on `port` has a replica online (bounded). */
async function waitForReplica(port) {
  const { call } = await import('../js-tests/support/redis.mjs');
  for (let i = 0; i < 200; i++) {
    if (/slave0:.*state=online/.test(await call(port, ['INFO', 'replication']))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no replica online on port ${port} after 10 s`);
}
async function flush() {
  const { call } = await import('../js-tests/support/redis.mjs');
  await call(redis.port, ['FLUSHALL']);
  await call(redis.port, ['SCRIPT', 'FLUSH']);
}

/**
 * Scenario 5 (and 5b): for each library, a fleet of `p.processes` children on one key,
 * interleaved over rounds; per round, throughput, waits, exclusion and CPU.
 */
async function contended(libs, p, tag) {
  return interleave(libs, roundsOf(p), async (lib) => {
    await flush();
    const key = `bench:${tag}:${lib}`;
    const fleet = await startFleet(
      p.processes,
      REDIS_CHILD,
      { scenario: 'contendedWorker', lib, params: { ...p, port: redis.port, key, count: p.perProcess } },
      {
        env: engineEnv(lib),
        // The contended warm-up and the measured part each stop at the deadline.
        timeoutMs: 2 * p.deadlineMs + 60_000,
      },
    );
    for (const c of fleet) c.go();
    const outs = await Promise.all(fleet.map((c) => c.result));
    // Counted from when the last process reached the measured part (it read Redis's CPU).
    const redisCpu = (await serverCpuMs(redis.port)) - outs.find((o) => o.redisCpuMsAtStart !== undefined).redisCpuMsAtStart;
    const completed = outs.reduce((n, o) => n + o.completed, 0);
    const elapsedMs = Math.max(...outs.map((o) => o.endedAt)) - Math.min(...outs.map((o) => o.startedAt));
    const waits = Float64Array.from(outs.flatMap((o) => o.waits)).sort();
    const at = (q) => waits[Math.min(waits.length - 1, Math.ceil(q * waits.length) - 1)];
    return {
      opsPerSec: (completed / elapsedMs) * 1000,
      completed,
      waitP50: at(0.5),
      waitP99: at(0.99),
      waitMax: waits[waits.length - 1],
      violations: outs.reduce((n, o) => n + o.violations, 0),
      followedSelf: outs.reduce((n, o) => n + o.followedSelf, 0) / completed,
      cpuPerOp: outs.reduce((n, o) => n + o.cpuMs, 0) / completed,
      redisCpuPerOp: redisCpu / completed,
      errors: outs.reduce((n, o) => n + o.errorCount, 0),
      firstError: outs.find((o) => o.errors.length)?.errors[0],
    };
  });
}

if (wanted(4) || wanted(5)) {
  redis = await startRedisServer();
  log(`redis-server on 127.0.0.1:${redis.port}`);
}

try {
  if (wanted(4)) {
    const columns = ['library', 'ops/s', 'p50', 'p99', 'round trips', 'RTT', '× floor', 'best peer', '× best peer', 'p50 × floor'];
    const rows = (r, best, list = REDIS_LIBS) =>
      list.map((lib) => [
        lib,
        fmtInt(med(r[lib], 'opsPerSec')),
        fmtMs(med(r[lib], 'p50')),
        fmtMs(med(r[lib], 'p99')),
        med(r[lib], 'commandsPerOp')?.toFixed(2) ?? '–',
        fmtMs(med(r[lib], 'rttMs')),
        fmtRatio(ratio(r, lib, 'floor', 'opsPerSec')),
        best,
        fmtRatio(ratio(r, lib, best, 'opsPerSec')),
        fmtRatio(ratio(r, lib, 'floor', 'p50')),
      ]);
    const uncontended = (p, list = REDIS_LIBS) =>
      interleave(list, roundsOf(p), async (lib) => {
        await flush();
        return runChild(REDIS_CHILD, { scenario: 'uncontended', lib, params: { ...p, port: redis.port } }, { env: engineEnv(lib) });
      });

    const p = S.redisUncontended;
    log(`4. Redis, uncontended: ${p.count} sequential executions, ${roundsOf(p)} rounds`);
    const libs4 = [...REDIS_LIBS, ...LINGER_LIBS];
    const r = await uncontended(p, libs4);
    const best = bestPeer(r, 'opsPerSec');
    sections.push(
      `### 4. Redis, uncontended: ${fmtInt(p.count)} sequential executions on one key\n\n` +
        'Latencies are per execution (acquire, empty callback, release). Round trips: commands the client sent per execution. ' +
        'RTT: median PING in the same process. leasehold-<engine>-linger: with `linger: 10` (the turn): a released lease stays in the process 10 ms for its next execution, so a loop asks Redis once a turn.\n\n' +
        table(columns, rows(r, best, libs4)),
    );
    for (const lib of REDIS_LIBS.filter((l) => l.startsWith('leasehold-'))) {
      const x = ratio(r, lib, best, 'opsPerSec');
      target(4, `${lib.slice(10)}: ≥ 1× the best peer (${best})`, x >= 1, `${fmtRatio(x)}; ${fmtRatio(ratio(r, lib, 'floor', 'opsPerSec'))} of the floor`);
    }
    for (const lib of LINGER_LIBS) {
      const x = ratio(r, lib, 'floor', 'opsPerSec');
      target(4, `${lib.slice(10)}: ≥ 5× the floor`, x >= 5, fmtRatio(x));
    }

    // 4r: leasehold with minReplicas: 1 against a primary that has one replica (its
    // own pair of servers, so that the other rows of 4 run without replication).
    const libsR = ['floor', 'leasehold-native', 'leasehold-native-replicas'].filter(available);
    const replicated = await startRedisServer();
    const replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(replicated.port)] });
    try {
      await waitForReplica(replicated.port);
      log(`4r. Redis with a replica, uncontended: ${p.count} sequential executions, ${roundsOf(p)} rounds`);
      const rr = await interleave(libsR, roundsOf(p), async (lib) => {
        await flush();
        return runChild(REDIS_CHILD, { scenario: 'uncontended', lib, params: { ...p, port: replicated.port } }, { env: engineEnv(lib) });
      });
      sections.push(
        `### 4r. Redis with one replica, uncontended: ${fmtInt(p.count)} sequential executions on one key\n\n` +
          'As scenario 4, on a primary with one replica on loopback. leasehold-native-replicas: `minReplicas: 1` ' +
          '(WAIT for the replica after each acquire, and after a renewal or release that raises the token floor).\n\n' +
          table(columns, rows(rr, 'leasehold-native', libsR)),
      );
      const x = ratio(rr, 'leasehold-native-replicas', 'leasehold-native', 'opsPerSec');
      if (x !== undefined) log(`4r. minReplicas: 1 runs at ${fmtRatio(x)} of leasehold-native's ops/s`);
    } finally {
      await replica.stop();
      await replicated.stop();
    }

    const k = S.redisManyKeys;
    log(`4b. Redis, uncontended, ${k.keys} keys round-robin: ${k.count} sequential executions, ${roundsOf(k)} rounds`);
    const rk = await uncontended(k);
    const bestK = bestPeer(rk, 'opsPerSec');
    sections.push(
      `### 4b. Redis, uncontended, a different key every execution: ${fmtInt(k.count)} sequential executions, round-robin over ${fmtInt(k.keys)} keys\n\n` +
        'As scenario 4, but each execution locks the next of the keys in turn (leasehold: the key as `operationKey`).\n\n' +
        table(columns, rows(rk, bestK)),
    );
    for (const lib of REDIS_LIBS.filter((l) => l.startsWith('leasehold-'))) {
      const x = ratio(rk, lib, bestK, 'opsPerSec');
      target('4b', `${lib.slice(10)}: ≥ 1× the best peer (${bestK})`, x >= 1, fmtRatio(x));
    }
  }

  if (wanted(5)) {
    // leasehold-native-fifo: the same with handOffAfter: 0 (every release hands the key
    // to the first queued waiter, strictly in arrival order), and floor-fifo, the least
    // such a handover costs on Redis: shown, not targets.
    const libs = ['floor-fifo', ...REDIS_LIBS.filter((l) => l !== 'floor'), 'leasehold-native-fifo', ...LINGER_LIBS].filter(available);
    const headers = (best) => ['library', 'ops/s', 'completed', 'wait p50', 'wait p99', 'wait max', 'same process', 'fleet CPU / acquisition', 'Redis CPU / acquisition', 'violations', 'errors', `× best peer (${best})`];
    const rows = (r, best, planned, list = libs) =>
      list.map((lib) => [
        lib,
        fmtInt(med(r[lib], 'opsPerSec')),
        `${fmtInt(med(r[lib], 'completed'))} / ${fmtInt(planned)}`,
        fmtMs(med(r[lib], 'waitP50')),
        fmtMs(med(r[lib], 'waitP99')),
        fmtMs(med(r[lib], 'waitMax')),
        `${fmtInt(100 * med(r[lib], 'followedSelf'))} %`,
        fmtMs(med(r[lib], 'cpuPerOp')),
        fmtMs(med(r[lib], 'redisCpuPerOp')),
        fmtInt(Math.max(...r[lib].map((x) => x?.violations ?? NaN))),
        fmtInt(Math.max(...r[lib].map((x) => x?.errors ?? NaN))),
        fmtRatio(ratio(r, lib, best, 'opsPerSec')),
      ]);

    const p = S.redisContended;
    log(`5. Redis, contended: ${p.processes} processes × ${p.perProcess}, ${roundsOf(p)} rounds`);
    const r = await contended(libs, p, 'contended');
    const best = bestPeer(r, 'opsPerSec');
    sections.push(
      `### 5. Redis, contended: ${p.processes} processes × ${p.perProcess} acquisitions of one key, waiting\n\n` +
        `Each process first warms up alone, as in scenario 4: ${fmtInt(p.warmup)} executions of the same body on a key of its own. Then all run ${fmtInt(p.contendedWarmup)} executions each on another shared key, so that the waiting paths are compiled too, and start the measured part together. ` +
        `Inside the lock, one Lua call INCRs a shared counter (any answer but 1 is a violation of exclusion) and records the holder's process; ` +
        `then DECR, sent without awaiting it on the same connection ahead of the release (so Redis runs it before anyone else can enter): one round trip inside the lock. ` +
        `leasehold-native-fifo is leasehold-native with \`handOffAfter: 0\`: every release hands the key to the first queued waiter, in arrival order across processes (leasehold's default gives each process 10 ms turns: within its turn the releasing process may take the key again, and passes it between its own executions with no Redis call). leasehold-<engine>-linger: with \`linger: 10\`. ` +
        `floor-fifo is not a lock to use (no ttl, no owner): the key's one token sits in a list, taken with BLPOP and pushed back on release, so Redis hands it to the longest-waiting process at once; it shows what handing over in arrival order costs on this machine, with nothing else. ` +
        `"Same process": share of acquisitions that went to the process that held the lock just before (a process re-taking the lock it just released). ` +
        `Fleet CPU: user + system time of the ${p.processes} client processes per completed acquisition; Redis CPU: the server's (INFO cpu) from the start of the measured part to the last process's end, per completed acquisition (the two cores run both: throughput follows their sum). ` +
        `Each process starts no new acquisition after ${p.deadlineMs / 1000} s (completed < planned then). Wait: from asking to holding.\n\n` +
        table(headers(best), rows(r, best, p.processes * p.perProcess)),
    );
    for (const lib of libs.filter((l) => l === 'leasehold-native' || l === 'leasehold-wasm' || isLinger(l))) {
      const x = ratio(r, lib, best, 'opsPerSec');
      const v = Math.max(...r[lib].map((o) => o?.violations ?? Infinity));
      const want = isLinger(lib) ? 2 : 1;
      target(5, `${lib.slice(10)}: ≥ ${want}× the best peer (${best}), 0 violations`, x >= want && v === 0, `${fmtRatio(x)}, ${v} violations`);
    }

    const t = S.redisThink;
    log(`5b. Redis, contended, ${t.thinkMs} ms between executions: ${t.processes} processes × ${t.perProcess}, ${roundsOf(t)} rounds`);
    const rt = await contended(libs, t, 'think');
    const bestT = bestPeer(rt, 'opsPerSec');
    sections.push(
      `### 5b. Redis, contended, with work between executions\n\n` +
        `Scenario 5, but each process waits ${t.thinkMs} ms on a timer after each execution before it asks again (in the contended warm-up too), as code that does other work between its executions. ` +
        `In scenario 5 a process asks again the moment it releases, so the key is almost never free while others wait, and a waiter that polls loses nothing by it. ` +
        `Here the releasing process is not there to take the key again: a waiter gets it only when it is told (leasehold: the release hands it over) or when its next poll comes (redis-semaphore every 10 ms, redlock 200 ± 100 ms, verrou 250 ms). ` +
        `${roundsOf(t)} rounds. Columns as in scenario 5.\n\n` +
        table(headers(bestT), rows(rt, bestT, t.processes * t.perProcess)),
    );
    for (const lib of libs.filter((l) => l === 'leasehold-native' || l === 'leasehold-wasm')) {
      const x = ratio(rt, lib, bestT, 'opsPerSec');
      const v = Math.max(...rt[lib].map((o) => o?.violations ?? Infinity));
      target('5b', `${lib.slice(10)}: ≥ 1.5× the best peer (${bestT}), 0 violations`, x >= 1.5 && v === 0, `${fmtRatio(x)}, ${v} violations`);
    }

    // floor-fifo's BLPOP blocks its connection, which the other executions of the
    // process share: it has no concurrent form.
    const c = S.redisConcurrent;
    const libsC = libs.filter((l) => l !== 'floor-fifo');
    log(`5c. Redis, contended, ${c.concurrency} executions at once per process: ${c.processes} processes × ${c.perProcess}, ${roundsOf(c)} rounds`);
    const rc = await contended(libsC, c, 'concurrent');
    const bestC = bestPeer(rc, 'opsPerSec');
    sections.push(
      `### 5c. Redis, contended, ${c.concurrency} executions at once in each of the ${c.processes} processes\n\n` +
        `Scenario 5 in a web service's shape: each process runs ${c.concurrency} loops at once on its one client (${c.processes * c.concurrency} contenders), ` +
        `sharing its ${fmtInt(c.perProcess)} executions (the contended warm-up likewise). floor-fifo is left out: its BLPOP blocks the connection the process's other executions share. ` +
        `${roundsOf(c)} rounds. Columns as in scenario 5.\n\n` +
        table(headers(bestC), rows(rc, bestC, c.processes * c.perProcess, libsC)),
    );
    for (const lib of libsC.filter((l) => l === 'leasehold-native' || l === 'leasehold-wasm')) {
      const x = ratio(rc, lib, bestC, 'opsPerSec');
      const p99 = ratio(rc, lib, bestC, 'waitP99');
      const v = Math.max(...rc[lib].map((o) => o?.violations ?? Infinity));
      target('5c', `${lib.slice(10)}: ≥ 2× the best peer (${bestC}), wait p99 ≤ its, 0 violations`, x >= 2 && p99 <= 1 && v === 0,
        `${fmtRatio(x)}, wait p99 ${fmtRatio(p99)} of its, ${v} violations`);
    }
  }
} finally {
  await redis?.stop();
}

// ---- etcd: scenarios 4 and 5 against etcd3's lock() --------------------------------

if ((wantedOnEtcd(4) || wantedOnEtcd(5)) && spawnSync('etcd', ['--version']).status === 0) {
  await runEtcdScenarios();
} else if (etcdOnly) {
  log('etcd is not installed (scripts/setup.sh installs etcd-server)');
}

async function runEtcdScenarios() {
  const ETCD_CHILD = path.join(BENCH, 'etcd.mjs');
  const libs = ['etcd3-lock', 'leasehold-native', 'leasehold-wasm'].filter(available);
  const { startEtcdCluster } = await import('../js-tests/support/etcd.mjs');
  const etcd = await startEtcdCluster(1);
  const endpoints = etcd.endpoints;
  log(`etcd on ${endpoints[0]}`);
  // CPU ms the etcd member has used so far (utime + stime from /proc, 100 ticks a second).
  const etcdCpuMs = () => {
    const fields = readFileSync(`/proc/${etcd.members[0].child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  };
  const ref = 'etcd3-lock';
  try {
    if (wantedOnEtcd(4)) {
      const p = S.etcdUncontended;
      log(`4e. etcd, uncontended: ${p.count} sequential executions, ${roundsOf(p)} rounds`);
      const r = await interleave(libs, roundsOf(p), (lib) =>
        runChild(ETCD_CHILD, { scenario: 'uncontended', lib, params: { ...p, endpoints } }, { env: engineEnv(lib) }),
      );
      sections.push(
        `### 4e. etcd, uncontended: ${fmtInt(p.count)} sequential executions on one key\n\n` +
          'One etcd member on loopback (data in memory, /dev/shm). Latencies are per execution (acquire, empty callback, release). RTT: median single-key get in the same process.\n\n' +
          table(
            ['library', 'ops/s', 'p50', 'p99', 'RTT', `× ${ref}`],
            libs.map((lib) => [lib, fmtInt(med(r[lib], 'opsPerSec')), fmtMs(med(r[lib], 'p50')), fmtMs(med(r[lib], 'p99')), fmtMs(med(r[lib], 'rttMs')), fmtRatio(ratio(r, lib, ref, 'opsPerSec'))]),
          ),
      );
      for (const lib of libs.filter((l) => l.startsWith('leasehold-'))) {
        const x = ratio(r, lib, ref, 'opsPerSec');
        target('4e', `${lib.slice(10)}: ≥ 1× ${ref}'s ops/s`, x >= 1, `${fmtRatio(x)}`);
      }
    }
    if (wantedOnEtcd(5)) {
      const p = S.etcdContended;
      log(`5e. etcd, contended: ${p.processes} processes × ${p.perProcess}, ${roundsOf(p)} rounds`);
      const r = await interleave(libs, roundsOf(p), async (lib) => {
        const key = `bench:contended:${lib}:${performance.now()}`;
        const fleet = await startFleet(p.processes, ETCD_CHILD, { scenario: 'contendedWorker', lib, params: { ...p, endpoints, key, count: p.perProcess } }, {
          env: engineEnv(lib),
          timeoutMs: 2 * p.deadlineMs + 60_000,
        });
        const cpu0 = etcdCpuMs();
        for (const c of fleet) c.go();
        const outs = await Promise.all(fleet.map((c) => c.result));
        const serverCpu = etcdCpuMs() - cpu0;
        const completed = outs.reduce((n, o) => n + o.completed, 0);
        const elapsedMs = Math.max(...outs.map((o) => o.endedAt)) - Math.min(...outs.map((o) => o.startedAt));
        const waits = Float64Array.from(outs.flatMap((o) => o.waits)).sort();
        const q = (x) => waits[Math.min(waits.length - 1, Math.ceil(x * waits.length) - 1)];
        // Exclusion, afterwards: no holder enters before the one before it left.
        const intervals = outs.flatMap((o) => o.intervals).sort((a, b) => a[0] - b[0]);
        let violations = 0;
        let leftAt = -Infinity;
        for (const [entered, left] of intervals) {
          if (entered < leftAt) violations += 1;
          leftAt = Math.max(leftAt, left);
        }
        return {
          opsPerSec: (completed / elapsedMs) * 1000,
          completed,
          waitP50: q(0.5),
          waitP99: q(0.99),
          waitMax: waits[waits.length - 1],
          violations,
          followedSelf: outs.reduce((n, o) => n + o.followedSelf, 0) / completed,
          cpuPerOp: outs.reduce((n, o) => n + o.cpuMs, 0) / completed,
          etcdCpuPerOp: serverCpu / completed,
          errors: outs.reduce((n, o) => n + o.errorCount, 0),
        };
      });
      sections.push(
        `### 5e. etcd, contended: ${p.processes} processes × ${p.perProcess} acquisitions of one key, waiting\n\n` +
          `As scenario 5, on one etcd member: each process warms up alone (${fmtInt(p.warmup)} executions on a key of its own), then with the fleet (${fmtInt(p.contendedWarmup)} each on another shared key), then all start the measured part together. ` +
          'Inside the lock, one round trip: a put of the holder\'s name that returns the previous one ("same process": the share of acquisitions that followed the same process). ' +
          'Violations: holders whose time inside overlapped another\'s (from their intervals, one machine, one clock). ' +
          `etcd3-lock does not wait: a held key rejects, and the adapter tries again every 10 ms. Fleet CPU: the ${p.processes} client processes; etcd CPU: the server's, per completed acquisition. ` +
          `Each process starts no new acquisition after ${p.deadlineMs / 1000} s.\n\n` +
          table(
            ['library', 'ops/s', 'completed', 'wait p50', 'wait p99', 'wait max', 'same process', 'fleet CPU / acquisition', 'etcd CPU / acquisition', 'violations', 'errors', `× ${ref}`],
            libs.map((lib) => [
              lib,
              fmtInt(med(r[lib], 'opsPerSec')),
              `${fmtInt(med(r[lib], 'completed'))} / ${fmtInt(p.processes * p.perProcess)}`,
              fmtMs(med(r[lib], 'waitP50')),
              fmtMs(med(r[lib], 'waitP99')),
              fmtMs(med(r[lib], 'waitMax')),
              `${fmtInt(100 * med(r[lib], 'followedSelf'))} %`,
              fmtMs(med(r[lib], 'cpuPerOp')),
              fmtMs(med(r[lib], 'etcdCpuPerOp')),
              fmtInt(Math.max(...r[lib].map((x) => x?.violations ?? NaN))),
              fmtInt(Math.max(...r[lib].map((x) => x?.errors ?? NaN))),
              fmtRatio(ratio(r, lib, ref, 'opsPerSec')),
            ]),
          ),
      );
      for (const lib of libs.filter((l) => l.startsWith('leasehold-'))) {
        const x = ratio(r, lib, ref, 'opsPerSec');
        const v = Math.max(...r[lib].map((o) => o?.violations ?? Infinity));
        target('5e', `${lib.slice(10)}: ≥ 2× ${ref}, 0 violations`, x >= 2 && v === 0, `${fmtRatio(x)}, ${v} violations`);
      }
    }
  } finally {
    await etcd.stop();
  }
}

if (wanted(6)) {
  const p = S.restart;
  log(`6. Redis restarted mid-hold: ttl ${p.ttlMs} ms, restarts ${p.offsets.join(', ')} ms after acquiring`);
  const r = await interleave(REDIS_LIBS, 1, (lib) =>
    runChild(REDIS_CHILD, { scenario: 'restart', lib, params: p }, { env: engineEnv(lib), timeoutMs: 120_000 }),
  );
  const rows = [];
  for (const lib of REDIS_LIBS) {
    const rounds = r[lib][0]?.rounds ?? [];
    const learned = (o) => (o.learnedAfterStopMs === undefined ? 'never' : fmtMs(o.learnedAfterStopMs));
    rows.push([
      lib,
      rounds.some((o) => o.hasToken) ? 'yes' : 'no',
      rounds.map(learned).join(', ') || r[lib][0]?.error || '–',
      fmtMs(median(rounds.map((o) => o.downMs))),
      `${rounds.filter((o) => o.staleAccepted).length} / ${rounds.length}`,
      `${rounds.filter((o) => o.takerAccepted).length} / ${rounds.length}`,
      [...new Set(rounds.map((o) => o.holderOutcome))].join(', '),
    ]);
  }
  sections.push(
    `### 6. Redis restarted without persistence mid-hold (ttl ${p.ttlMs} ms)\n\n` +
      `The holder restarts Redis ${p.offsets.join(' / ')} ms after acquiring (just after a ttl/3 renewal). ` +
      'Then another process takes the key and writes to a fenced resource (a Lua script refusing tokens lower than one it has seen; ' +
      'a write without a token cannot be refused), then the stale holder writes. "Learns": from the server going down to the library telling the holder ' +
      `(leasehold: onLockLost and the signal; redlock: using()'s signal; redis-semaphore: onLockLost), watched until ttl + 500 ms. ` +
      `Target: within ttl/3 + one round trip = ${fmtMs(p.ttlMs / 3)} + RTT.\n\n` +
      table(['library', 'fencing token', 'learns after the loss', 'server down for', 'stale writes accepted', 'taker writes accepted', 'holder outcome'], rows),
  );
  for (const lib of REDIS_LIBS.filter((l) => l.startsWith('leasehold-'))) {
    const rounds = r[lib][0]?.rounds ?? [];
    const worst = Math.max(...rounds.map((o) => o.learnedAfterStopMs ?? Infinity));
    const bound = Math.max(...rounds.map((o) => p.ttlMs / 3 + o.rttMs));
    const stale = rounds.filter((o) => o.staleAccepted).length;
    target(6, `${lib.slice(10)}: learns within ttl/3 + one round trip of the loss; 0 stale writes`, rounds.length > 0 && worst <= bound && stale === 0,
      `worst ${fmtMs(worst)} (bound ${fmtMs(bound)}), ${stale} stale writes accepted`);
  }
}

// ---- 8. permits (bench/scenario-permits.mjs) -----------------------------------------

if (wanted(8)) {
  const { runPermits } = await import('./scenario-permits.mjs');
  await runPermits({ quick, argv, roundsOf, interleave, med, ratio, bestPeer, table, target, sections, log, available });
}

// ---- report -------------------------------------------------------------------------

function version(pkg) {
  try {
    return JSON.parse(readFileSync(path.join(BENCH, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  } catch {
    return '?';
  }
}

function commandOutput(cmd, args, cwd = ROOT) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : '?';
}

/**
 * How an idle CPU sleeps (Linux cpuidle), when readable: on a VM, waking a halted vCPU
 * is most of a loopback round trip, so it moves every Redis number (bench/notes/).
 */
function cpuIdle() {
  const read = (file) => {
    try {
      return readFileSync(file, 'utf8').trim();
    } catch {
      return undefined;
    }
  };
  const driver = read('/sys/devices/system/cpu/cpuidle/current_driver');
  if (driver === undefined) return '';
  const poll = read('/sys/module/haltpoll/parameters/guest_halt_poll_ns');
  return `; cpuidle ${driver}${driver === 'haltpoll' && poll !== undefined ? ` (guest_halt_poll_ns ${poll})` : ''}`;
}

const wallS = (performance.now() - started) / 1000;
const cpus = os.cpus();
const leaseholdVersion = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
const commit = commandOutput('git', ['rev-parse', '--short', 'HEAD']);
const dirty = commandOutput('git', ['status', '--porcelain', '--', 'lib', 'core', 'bindings-node', 'bindings-wasm']) ? ' + uncommitted engine changes' : '';
const environment = [
  `- Date: ${new Date().toISOString()}; wall time of the run: ${wallS.toFixed(0)} s${quick ? ' (--quick)' : ''}`,
  `- Machine: ${cpus[0]?.model ?? '?'} × ${cpus.length}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.type()} ${os.release()}${cpuIdle()}; load average (1 / 5 / 15 min) at the start ${loadAtStart.map((x) => x.toFixed(1)).join(' / ')}, at the end ${os.loadavg().map((x) => x.toFixed(1)).join(' / ')}`,
  `- Node ${process.version}; ${commandOutput('redis-server', ['--version']).replace(/ sha=.*/, '')}`,
  `- leasehold ${leaseholdVersion} (${commit}${dirty}); engines: ${engines.join(', ')}`,
  `- Redis client ioredis ${version('ioredis')}; ${commandOutput('etcd', ['--version']).split('\n')[0]}`,
].join('\n');
const peerTable = table(['peer', 'loaded with', 'build it ran', 'other builds shipped'], peerBuilds());
const targetTable = table(
  ['scenario', 'target', 'result', 'measured'],
  targets.map((t) => [String(t.scenario), t.text, t.met ? 'met' : '**missed**', t.detail]),
);
const report = `## Results on Node ${process.versions.node.split('.')[0]}\n\n${environment}\n\n### Peers, in their fastest build\n\n${peerTable}\n\n### Targets\n\n${targetTable}\n\n${sections.join('\n\n')}\n`;

process.stdout.write(`\n${report}`);
log(`done in ${wallS.toFixed(0)} s`);

if (write) {
  const dir = path.join(BENCH, 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `node${process.versions.node.split('.')[0]}${permitsOnly ? '-permits' : ''}.md`);
  const header =
    `<!-- Written by \`node bench/run.mjs${permitsOnly ? ' --only=8' : ''}\` (${permitsOnly ? 'scenario 8 alone' : 'a full run'}); bench/RESULTS.md explains it. -->\n\n` +
    `# ${permitsOnly ? 'Scenario 8 (permits)' : 'Full results'}\n\nHow to read these tables, and what they mean for each target: [bench/RESULTS.md](../RESULTS.md).\n\n`;
  writeFileSync(file, header + report);
  log(`wrote ${path.relative(ROOT, file)}`);
}
