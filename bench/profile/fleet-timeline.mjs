// Diagnosis for scenario 5: where a fleet's time goes, library against library. Each
// process runs scenario 5's body (ENTER, a Lua call that INCRs a counter and swaps in
// the holder's name, then DECR sent without awaiting it) on one shared key. The
// holders' spans, merged across processes on one clock, split the run's wall time into:
//   hold        the body (ENTER's round trip)
//   same gap    from a body's end to the next body's start, same process: its release,
//               and its next acquire
//   cross gap   the same when another process comes next: a handover
// and print, per library:
// - the in-turn step timeline: median µs between the client's events (asked, each
//   command sent and answered, holding, body done), over acquisitions that followed
//   the same process, from the first process's view;
// - Redis's CPU per acquisition (INFO cpu), and the commands that took the most time;
// - CPU of the fleet per acquisition, main threads apart from the others (V8's, libuv's),
//   this tool's own bookkeeping included (a hook on every command, a few stamps per
//   acquisition: the same for every library).
//
//   node bench/profile/fleet-timeline.mjs [processes=8] [perProcess=500] [rounds=2] [libs=redis-semaphore,leasehold-native] [--node-args="..."]
//
// --node-args: flags for every process of the fleet (say, V8's `--single-threaded-gc`).
// --contended-warmup=N: as scenario 5 of run.mjs does, each process then also runs N
// executions on a second shared key, all together, and all start the measured part
// together. Redis's CPU and commands are then counted from there.
// Starts its own redis-server. Linux only for the thread split (reads /proc/self/task).

import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { call, commandStats, startRedisServer } from '../../js-tests/support/redis.mjs';
import { createRedisLock } from '../adapters/redis.mjs';
import { engineEnv, readyThenWaitForGo, runAsChild, startFleet } from '../support/children.mjs';
import { connect, meet, serverCpuMs } from '../support/redis-client.mjs';
import { median } from '../support/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const ENTER = `local n = redis.call('INCR', KEYS[1])
return {n, redis.call('GETSET', KEYS[2], ARGV[1])}`;

/** CPU ms of this process's threads: { main, other }; undefined where /proc is missing. */
function threadCpuMs() {
  try {
    const out = { main: 0, other: 0 };
    for (const tid of readdirSync('/proc/self/task')) {
      // Time on the CPU in ns (schedstat), not the 10 ms ticks of /proc/<pid>/stat.
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'latin1').split(' ')[0]);
      out[tid === String(process.pid) ? 'main' : 'other'] += ns / 1e6;
    }
    return out;
  } catch {
    return undefined;
  }
}

async function worker({ lib, port, key, count, processes, contendedWarmup }) {
  const client = await connect(port);
  // Each command's send and answer, as events of the current acquisition.
  let events = [];
  const send = client.sendCommand;
  client.sendCommand = (command, stream) => {
    const name = command.name;
    events.push([`${name}>`, performance.now()]);
    command.promise.then(
      () => events.push([`${name}<`, performance.now()]),
      () => {},
    );
    return send(command, stream);
  };
  const lock = await createRedisLock(lib, { client, ttlMs: 10_000, waitMs: 60_000 });
  const me = String(process.pid);
  const body = (k, onEntered) => async () => {
    const [, last] = await client.eval(ENTER, 2, `${k}:holders`, `${k}:last`, me);
    onEntered(last === me);
    client.decr(`${k}:holders`).catch(() => {});
  };
  const own = `${key}:warm:${me}`;
  const warm = body(own, () => {});
  for (let i = 0; i < 1_000; i++) await lock.run(own, warm);
  await readyThenWaitForGo();
  let serverCpuAtStart;
  if (contendedWarmup > 0) {
    const shared = `${key}:warm`;
    const warmShared = body(shared, () => {});
    for (let i = 0; i < contendedWarmup; i++) await lock.run(shared, warmShared);
    serverCpuAtStart = await meet(client, `${key}:measure`, processes, {
      whenAllArrived: async () => {
        await client.config('RESETSTAT');
        return serverCpuMs(port);
      },
    });
  }
  const threads0 = threadCpuMs();
  // Per acquisition: [hold start, hold end] on the shared clock; and, for those that
  // followed this process, the step timeline from the previous body's end.
  const spans = [];
  const steps = new Map();
  for (let i = 0; i < count; i++) {
    const previous = events;
    events = [['asked', performance.now()]];
    let followedSelf = false;
    await lock.run(
      key,
      body(key, (self) => {
        followedSelf = self;
      }),
    );
    // The body starts when its ENTER is sent and ends when its DECR is.
    const enterAt = events.findIndex(([e]) => e === 'eval>');
    const start = events[enterAt][1];
    const end = events.find(([e]) => e === 'decr>')[1];
    events.push(['done', performance.now()]);
    spans.push([performance.timeOrigin + start, performance.timeOrigin + end]);
    if (followedSelf && i > 0) {
      const fromBodyEnd = previous.slice(previous.findIndex(([e]) => e === 'decr>'));
      const seq = [...fromBodyEnd.filter(([e]) => e !== 'done'), ...events.slice(0, enterAt + 1)];
      const names = seq.map(([e]) => e).join(' ');
      let list = steps.get(names);
      if (list === undefined) steps.set(names, (list = []));
      list.push(seq.map(([, t], j) => (j === 0 ? 0 : t - seq[j - 1][1])));
    }
  }
  const threads1 = threadCpuMs();
  await lock.close();
  client.disconnect();
  // The commonest in-turn sequence, with the median of each step.
  const [names, rows] = [...steps].sort((a, b) => b[1].length - a[1].length)[0] ?? ['', []];
  const timeline = rows.length === 0 ? [] : names.split(' ').map((name, j) => [name, median(rows.map((r) => r[j]))]);
  const cpuMs = threads0 && threads1 ? { main: threads1.main - threads0.main, other: threads1.other - threads0.other } : undefined;
  return { spans, timeline, timelineCount: rows.length, cpuMs, serverCpuAtStart };
}

await runAsChild(worker);

const us = (ms) => (Number.isFinite(ms) ? `${(ms * 1000).toFixed(1)} µs` : '–');
const contendedWarmup = Number(process.argv.find((a) => a.startsWith('--contended-warmup='))?.slice('--contended-warmup='.length) ?? 0);
const nodeArgs = (process.argv.find((a) => a.startsWith('--node-args='))?.slice('--node-args='.length) ?? '').split(' ').filter(Boolean);
const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const processes = Number(positional[0] ?? 8);
const perProcess = Number(positional[1] ?? 500);
const rounds = Number(positional[2] ?? 2);
const libs = (positional[3] ?? 'redis-semaphore,leasehold-native').split(',');
const server = await startRedisServer();
try {
  for (let r = 0; r < rounds; r++) {
    for (const lib of libs) {
      await call(server.port, ['FLUSHALL']);
      const key = `fleet:${lib}`;
      const payload = { lib, port: server.port, key, count: perProcess, processes, contendedWarmup };
      const fleet = await startFleet(processes, SELF, payload, { env: engineEnv(lib), nodeArgs, timeoutMs: 120_000 });
      await call(server.port, ['CONFIG', 'RESETSTAT']);
      const serverCpu0 = await serverCpuMs(server.port);
      for (const c of fleet) c.go();
      const outs = await Promise.all(fleet.map((c) => c.result));
      const serverCpu = (await serverCpuMs(server.port)) - (outs.find((o) => o.serverCpuAtStart !== undefined)?.serverCpuAtStart ?? serverCpu0);
      const stats = await commandStats(server.port);
      // Holds of all processes on one clock, in order; each knows its process.
      const holds = outs.flatMap((o, p) => o.spans.map(([a, b]) => [a, b, p])).sort((x, y) => x[0] - y[0]);
      const part = { hold: [], same: [], cross: [] };
      for (let i = 0; i < holds.length; i++) {
        part.hold.push(holds[i][1] - holds[i][0]);
        if (i > 0) part[holds[i][2] === holds[i - 1][2] ? 'same' : 'cross'].push(holds[i][0] - holds[i - 1][1]);
      }
      const n = holds.length;
      const wall = holds[n - 1][1] - holds[0][0];
      const line = (name, xs) => {
        const total = xs.reduce((s, x) => s + x, 0);
        return `  ${name.padEnd(10)} ${String(xs.length).padStart(5)} × median ${us(median(xs)).padStart(9)}, mean ${us(total / xs.length).padStart(9)}: ${((total / wall) * 100).toFixed(0).padStart(3)} % of the wall time`;
      };
      const top = Object.entries(stats)
        .filter(([name]) => !['config|resetstat', 'flushall', 'info'].includes(name))
        .sort((a, b) => b[1].usec - a[1].usec)
        .slice(0, 4)
        .map(([name, v]) => `${name} ${(v.calls / n).toFixed(2)} × ${v.usec_per_call.toFixed(1)} µs`)
        .join(', ');
      const cpu = outs.every((o) => o.cpuMs) ? outs.reduce((s, o) => ({ main: s.main + o.cpuMs.main, other: s.other + o.cpuMs.other }), { main: 0, other: 0 }) : undefined;
      console.log(`${lib}: ${n} acquisitions in ${wall.toFixed(0)} ms = ${Math.round((n / wall) * 1000)}/s`);
      console.log(line('hold', part.hold));
      console.log(line('same gap', part.same));
      console.log(line('cross gap', part.cross));
      const first = outs[0];
      console.log(`  in turn (${first.timelineCount} of the first process's): ${first.timeline.map(([e, t], j) => (j === 0 ? e : `+${(t * 1000).toFixed(1)} ${e}`)).join(' ')}`);
      console.log(
        `  Redis CPU ${((serverCpu / n) * 1000).toFixed(1)} µs per acquisition (commands with the most time, a script's own calls counted in it too: ${top})` +
          (cpu ? `; fleet CPU ${((cpu.main / n) * 1000).toFixed(0)} µs main threads + ${((cpu.other / n) * 1000).toFixed(0)} µs other threads per acquisition` : ''),
      );
    }
  }
} finally {
  await server.stop();
}
