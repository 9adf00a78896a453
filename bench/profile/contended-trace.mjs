// Diagnosis for scenario 5: a fleet of processes on one Redis key through leasehold,
// counting what the engine asks of the store (tries, subscribes, unsubscribes), the
// grants releases hand over, and how
// each try came about: inside a release announcement, or otherwise (first try, poll).
//
//   node bench/profile/contended-trace.mjs [processes=8] [perProcess=200] [--linger] [--prof=DIR] [--warmup=N] [--episodes]
//
// --warmup=N: each process first runs N executions alone on a key of its own (as
// scenario 5 of run.mjs does). CPU is split between waiting (asking to holding) and
// holding (holding to execute resolving, release included).
//
// --episodes: waits over 1 ms split by how they ended (a grant message, or a try that
// took the key) and by the tries they made (a second try is the engine's poll), with
// CPU of all threads and, on Linux, of the main thread alone (the rest is V8's
// background threads: compilation, GC). The first 3 executions of each process are
// counted apart: the first wait opens the store's subscriber connection. Reading the
// main thread's CPU costs a /proc read per execution, so this is off by default.
//
// Starts its own redis-server; LEASEHOLD_ENGINE picks the engine.

import { fileURLToPath } from 'node:url';
import { commandStats, startRedisServer } from '../../js-tests/support/redis.mjs';
import { readyThenWaitForGo, runAsChild, startFleet } from '../support/children.mjs';
import { connect } from '../support/redis-client.mjs';

const SELF = fileURLToPath(import.meta.url);

async function worker({ port, key, count, linger, warmup, episodes }) {
  const api = (await import('../../lib/entries/index.mjs')).default;
  const { RedisLockStore } = await import('../../lib/stores/redis/index.mjs');
  const client = await connect(port);
  const store = new RedisLockStore({ client, prefix: 'trace' });
  const c = { tries: 0, triesInWake: 0, triesInTimer: 0, grants: 0, grantsOnRelease: 0, subscribes: 0, unsubscribes: 0, wakes: 0, wakesIdle: 0, sameAsLast: 0 };
  let inWake = false;
  // Tries made inside a timer callback are the engine's polls (the host runs the engine's
  // timers from a global setTimeout).
  let inTimer = false;
  const realSetTimeout = globalThis.setTimeout;
  globalThis.setTimeout = (fn, ms, ...rest) =>
    realSetTimeout(
      (...args) => {
        inTimer = true;
        try {
          return fn(...args);
        } finally {
          inTimer = false;
        }
      },
      ms,
      ...rest,
    );
  let waiting = false;
  // --episodes: the current wait's tries, and whether a grant message ended it.
  let episodeTries = 0;
  let episodeGranted = false;
  const kinds = {};
  const fs = episodes ? await import('node:fs') : undefined;
  const schedstat = `/proc/self/task/${process.pid}/schedstat`;
  const mainCpuUs = () => {
    try {
      return Number(fs.readFileSync(schedstat, 'latin1').split(' ')[0]) / 1000;
    } catch {
      return Number.NaN; // not Linux
    }
  };
  const acquire = store.acquire.bind(store);
  store.acquire = async (...args) => {
    episodeTries += 1;
    c.tries += 1;
    if (inWake) c.triesInWake += 1;
    if (inTimer) c.triesInTimer += 1;
    const r = await acquire(...args);
    if (r) c.grants += 1;
    return r;
  };
  const realSubscribe = store.subscribe.bind(store);
  // --linger: one real subscription per key, kept after the waiter leaves; the engine's
  // subscribe/unsubscribe only plug its listener in and out (what a lingering
  // subscription in RedisLockStore would do).
  const lingering = new Map();
  const subscribe = linger
    ? (k, onReleased) => {
        let slot = lingering.get(k);
        if (!slot) {
          slot = { listener: undefined };
          lingering.set(k, slot);
          realSubscribe(k, (grant) => slot.listener?.(grant));
        }
        slot.listener = onReleased;
        return () => {
          if (slot.listener === onReleased) slot.listener = undefined;
        };
      }
    : realSubscribe;
  store.subscribe = (k, onReleased) => {
    c.subscribes += 1;
    const stop = subscribe(k, (grant) => {
      c.wakes += 1;
      if (grant !== undefined) {
        c.grantsOnRelease += 1;
        episodeGranted = true;
      }
      if (!waiting) c.wakesIdle += 1;
      inWake = true;
      try {
        return onReleased(grant);
      } finally {
        inWake = false;
      }
    });
    return () => {
      c.unsubscribes += 1;
      stop();
    };
  };
  const body = (k) => async () => {
    waiting = false;
    const last = await client.getset(`${k}:last`, String(process.pid));
    if (last === String(process.pid)) c.sameAsLast += 1;
    await client.ping();
  };
  const own = `${key}:warm:${process.pid}`;
  const warm = new api.ResiliencePipelineBuilder().addLock({ key: own, store, ttl: 10_000, wait: 60_000 }).build();
  for (let i = 0; i < (warmup ?? 0); i++) await warm.execute(body(own));
  for (const name of Object.keys(c)) c[name] = 0;
  c.longWaits = 0;
  c.cpuLongWaitsMs = 0;
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ key, store, ttl: 10_000, wait: 60_000 }).build();
  const run = body(key);
  await readyThenWaitForGo();
  const waits = [];
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let cpuWaiting = 0;
  for (let i = 0; i < count; i++) {
    const asked = performance.now();
    const askedCpu = process.cpuUsage();
    const askedMain = episodes ? mainCpuUs() : 0;
    episodeTries = 0;
    episodeGranted = false;
    waiting = true;
    await pipeline.execute(() => {
      waits.push(performance.now() - asked);
      const held = process.cpuUsage(askedCpu);
      cpuWaiting += held.user + held.system;
      if (performance.now() - asked > 1) {
        c.longWaits += 1;
        c.cpuLongWaitsMs += (held.user + held.system) / 1000;
        if (episodes) {
          const kind = `${i < 3 ? 'first 3: ' : ''}${episodeGranted ? 'granted' : 'took it'}, ${Math.min(episodeTries, 3)}${episodeTries >= 3 ? '+' : ''} ${episodeTries === 1 ? 'try' : 'tries'}`;
          const k = (kinds[kind] ??= { n: 0, cpuUs: 0, mainUs: 0, wallMs: 0 });
          k.n += 1;
          k.cpuUs += held.user + held.system;
          k.mainUs += mainCpuUs() - askedMain;
          k.wallMs += performance.now() - asked;
        }
      }
      return run();
    });
  }
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  c.cpuWaitingMs = cpuWaiting / 1000;
  c.cpuMs = (cpu.user + cpu.system) / 1000;
  c.sysMs = cpu.system / 1000;
  await store.close();
  client.disconnect();
  waits.sort((a, b) => a - b);
  return { ...c, kinds, elapsedMs, waitP50: waits[waits.length >> 1], waitP99: waits[Math.ceil(waits.length * 0.99) - 1] };
}

await runAsChild(worker);

const processes = Number(process.argv[2] ?? 8);
const perProcess = Number(process.argv[3] ?? 200);
const linger = process.argv.includes('--linger');
const episodes = process.argv.includes('--episodes');
const warmup = Number(process.argv.find((a) => a.startsWith('--warmup='))?.slice('--warmup='.length) ?? 0);
// --prof=DIR: every worker writes a V8 CPU profile there (summarise with profile/top.mjs).
const profDir = process.argv.find((a) => a.startsWith('--prof='))?.slice('--prof='.length);
const nodeArgs = profDir ? ['--cpu-prof', '--cpu-prof-interval', '200', '--cpu-prof-dir', profDir] : [];
const server = await startRedisServer();
try {
  const fleet = await startFleet(processes, SELF, { port: server.port, key: 'k', count: perProcess, linger, warmup, episodes }, {
    timeoutMs: 120_000,
    nodeArgs,
  });
  const t0 = performance.now();
  for (const f of fleet) f.go();
  const outs = await Promise.all(fleet.map((f) => f.result));
  const wall = performance.now() - t0;
  const sum = (k) => outs.reduce((n, o) => n + o[k], 0);
  const total = processes * perProcess;
  console.log(`${process.env.LEASEHOLD_ENGINE || 'native'}${linger ? ' --linger' : ''}${warmup ? ` --warmup=${warmup}` : ''}: ${total} executions in ${wall.toFixed(0)} ms = ${((total / wall) * 1000).toFixed(0)}/s`);
  for (const k of ['tries', 'triesInWake', 'triesInTimer', 'grants', 'grantsOnRelease', 'subscribes', 'unsubscribes', 'wakes', 'wakesIdle', 'sameAsLast']) {
    console.log(`  ${k.padEnd(13)} ${String(sum(k)).padStart(7)}  (${(sum(k) / total).toFixed(2)} per execution)`);
  }
  console.log(
    `  client CPU per execution (all processes): ${((sum('cpuMs') / total) * 1000).toFixed(0)} µs, of which system ${((sum('sysMs') / total) * 1000).toFixed(0)} µs, while waiting ${((sum('cpuWaitingMs') / total) * 1000).toFixed(0)} µs`,
  );
  console.log(`  waits over 1 ms: ${sum('longWaits')}, CPU during each: ${((sum('cpuLongWaitsMs') / sum('longWaits')) * 1000).toFixed(0)} µs`);
  if (episodes) {
    const kinds = {};
    for (const o of outs) {
      for (const [kind, v] of Object.entries(o.kinds)) {
        const k = (kinds[kind] ??= { n: 0, cpuUs: 0, mainUs: 0, wallMs: 0 });
        for (const f of Object.keys(k)) k[f] += v[f];
      }
    }
    for (const [kind, k] of Object.entries(kinds).sort()) {
      console.log(
        `    ${kind.padEnd(28)} ${String(k.n).padStart(4)} waits, CPU each ${(k.cpuUs / k.n).toFixed(0).padStart(5)} µs (main thread ${(k.mainUs / k.n).toFixed(0).padStart(5)}), wall ${(k.wallMs / k.n).toFixed(1)} ms`,
      );
    }
  }
  console.log(`  first tries ${total}; other tries (a retry after a release announced while a try was in flight) ${sum('tries') - sum('triesInWake') - sum('triesInTimer') - total}`);
  const stats = await commandStats(server.port);
  const perExecution = Object.entries(stats)
    .filter(([cmd]) => cmd !== 'info')
    .map(([cmd, st]) => `${cmd} ${(st.calls / total).toFixed(2)}`)
    .join(', ');
  console.log(`  Redis commands per execution (scripts' own included): ${perExecution}`);
  console.log(`  wait p50 per process (ms): ${outs.map((o) => o.waitP50.toFixed(2)).join(' ')}`);
  console.log(`  wait p99 per process (ms): ${outs.map((o) => o.waitP99.toFixed(1)).join(' ')}`);
} finally {
  await server.stop();
}
