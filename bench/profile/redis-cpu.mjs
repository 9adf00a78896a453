// Diagnosis for scenario 4 (one key back to back, default options): the client CPU per
// execution, leasehold against its peers, in one run. Each library runs in a fresh
// process of its own, in interleaved rounds (round r rotates the order), against one
// redis-server started here; each process warms up, then runs `count` executions with
// process.cpuUsage() around the measured loop (user + system, all of the process's
// threads). Ratios are per round (leasehold ÷ peer), medians over rounds.
//
//   node bench/profile/redis-cpu.mjs [rounds=5] [count=20000] [--libs=a,b] [--prof=DIR]
//
// --prof=DIR: each library's last round also profiles its measured loop (the inspector's
// CPU profiler, sampling every 50 µs), and writes to DIR/<lib>.txt the loop's samples
// by layer (by file: leasehold's host, its Redis store, the engine's binding, the
// client, Node's streams and sockets, the socket write itself, GC) and the top 30
// functions by self time. The profiler costs CPU itself: read its shares, not the
// round's µs.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../../js-tests/support/redis.mjs';
import { createRedisLock } from '../adapters/redis.mjs';
import { engineEnv, runAsChild, runChild } from '../support/children.mjs';
import { connect } from '../support/redis-client.mjs';
import { median } from '../support/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const noop = async () => 0;

await runAsChild(async ({ lib, port, count, warmup, profile }) => {
  const client = await connect(port);
  const lock = await createRedisLock(lib, { client, ttlMs: 10_000, waitMs: 0 });
  const key = `cpu:${lib}`;
  for (let i = 0; i < warmup; i++) await lock.run(key, noop);
  let session;
  if (profile) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 50 });
    await session.post('Profiler.start');
  }
  const commands0 = client.benchCommands;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await lock.run(key, noop);
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const commandsPerOp = (client.benchCommands - commands0) / count;
  // The profile goes to a file: it can be larger than a pipe takes before exit.
  if (session) writeFileSync(profile, JSON.stringify((await session.post('Profiler.stop')).profile));
  session?.disconnect();
  await lock.close();
  client.disconnect();
  return { cpuUs: (cpu.user + cpu.system) / count, userUs: cpu.user / count, opsPerSec: (count / elapsedMs) * 1000, commandsPerOp };
});

const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const flag = (name) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(positional[0] ?? 5);
const count = Number(positional[1] ?? 20_000);
const libs = (flag('libs') ?? 'redis-semaphore,leasehold-native,leasehold-wasm,floor').split(',');
const profDir = flag('prof');

/** The layer a function belongs to, by its file. */
function layer({ functionName, url }) {
  if (url.includes('node_modules/ioredis') || url.includes('redis-parser') || url.includes('standard-as-callback') || url.includes('cluster-key-slot') || url.includes('denque')) return 'ioredis (encode, parse, queue)';
  if (url.includes('node_modules/')) return `peer library (${url.split('node_modules/').pop().split('/')[0]})`;
  if (url.includes('/lib/host/')) return 'leasehold host (lib/host)';
  if (url.includes('/lib/stores/')) return 'leasehold Redis store (lib/stores)';
  if (url.includes('/lib/engine') || url.includes('/dist/') || url.includes('/bindings')) return 'engine binding (JS side)';
  if (url.includes('/lib/')) return 'leasehold other (lib/)';
  if (url.includes('/bench/')) return 'bench loop';
  if (url.startsWith('node:')) return 'Node internals (streams, sockets, timers, promises)';
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(idle)') return 'idle';
  if (functionName === 'writeUtf8String' || functionName === 'writev' || functionName === 'writeBuffer') return 'socket write (syscall)';
  if (functionName === '(program)') return '(program: V8/native, unattributed)';
  if (url === '' && /^[a-z]/.test(functionName)) return `native: ${functionName}`;
  return `other: ${functionName}`;
}

/** Self time by function, and by layer, from a CPU profile, idle excluded. */
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const ms = new Map();
  const layers = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') continue;
    const name = `${functionName || '(anonymous)'} ${url ? `${basename(url)}:${lineNumber + 1}` : ''}`;
    const dt = (profile.timeDeltas[i] ?? 0) / 1000;
    ms.set(name, (ms.get(name) ?? 0) + dt);
    const l = layer(node.callFrame);
    layers.set(l, (layers.get(l) ?? 0) + dt);
  }
  const sorted = (m) => [...m].map(([name, t]) => ({ name, ms: t })).sort((a, b) => b.ms - a.ms);
  return { functions: sorted(ms), layers: sorted(layers) };
}

const server = await startRedisServer();
try {
  const results = Object.fromEntries(libs.map((l) => [l, []]));
  // With --prof, one more round, profiled, kept out of the table.
  for (let r = 0; r < rounds + (profDir === undefined ? 0 : 1); r++) {
    for (let i = 0; i < libs.length; i++) {
      const lib = libs[(i + r) % libs.length];
      const profile = r === rounds ? join(profDir, `${lib}.cpuprofile`) : undefined;
      if (profile) mkdirSync(profDir, { recursive: true });
      const out = await runChild(SELF, { lib, port: server.port, count, warmup: Math.min(5_000, count), profile }, { env: engineEnv(lib) });
      if (!profile) results[lib].push(out);
      else {
        const { functions, layers } = selfTimes(JSON.parse(readFileSync(profile, 'utf8')));
        const total = functions.reduce((n, x) => n + x.ms, 0);
        const row = (x) => `${((x.ms / total) * 100).toFixed(1).padStart(5)}%  ${((x.ms * 1000) / count).toFixed(1).padStart(5)} µs  ${x.name}`;
        writeFileSync(
          join(profDir, `${lib}.txt`),
          `${lib}: the measured loop's samples, idle excluded (${total.toFixed(0)} ms, ${((total * 1000) / count).toFixed(1)} µs per execution, profiler included)\n\n` +
            `by layer:\n${layers.map(row).join('\n')}\n\ntop functions by self time:\n${functions.slice(0, 30).map(row).join('\n')}\n`,
        );
      }
    }
  }
  const peer = libs.includes('redis-semaphore') ? 'redis-semaphore' : libs[0];
  console.log(`${rounds} rounds × ${count} executions, one key, default options; medians over rounds`);
  console.log(`${'library'.padEnd(18)} ${'CPU µs/exec'.padStart(11)} ${'user µs'.padStart(8)} ${'ops/s'.padStart(7)} cmds  CPU ÷ ${peer}  ops ÷ ${peer}`);
  for (const lib of libs) {
    const rs = results[lib];
    const cpuRatio = median(rs.map((x, i) => x.cpuUs / results[peer][i].cpuUs));
    const opsRatio = median(rs.map((x, i) => x.opsPerSec / results[peer][i].opsPerSec));
    console.log(
      `${lib.padEnd(18)} ${median(rs.map((x) => x.cpuUs)).toFixed(1).padStart(11)} ${median(rs.map((x) => x.userUs)).toFixed(1).padStart(8)} ` +
        `${Math.round(median(rs.map((x) => x.opsPerSec))).toString().padStart(7)} ${rs[0].commandsPerOp.toFixed(1).padStart(4)}  ` +
        `${cpuRatio.toFixed(2).padStart(5)}×  ${opsRatio.toFixed(2).padStart(5)}×`,
    );
  }
} finally {
  await server.stop();
}
