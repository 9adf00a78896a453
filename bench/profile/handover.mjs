// Diagnosis for scenario 5: what one handover between processes costs, leasehold's
// against the least Redis allows. A fleet of processes takes one key in turn, each
// acquisition entering with a Lua call that reads the server's TIME (T0), then
// stamping TIME again just before its release (T1, sent without awaiting it, on the same
// connection as the release). From the server's clock alone:
//   holding   T1 - T0 of one acquisition
//   handover  T0 of the next acquisition - T1: the release, the next holder learning
//             of it, and its first command reaching Redis
// plus fleet CPU and Redis commands per acquisition. Libraries (bench/adapters/redis.mjs):
// floor-fifo (a BLPOP/RPUSH token list: every release hands over) and
// leasehold-native-fifo (`handOffAfter: 0`: every release hands over), or any other.
//
//   node bench/profile/handover.mjs [processes=8] [perProcess=500] [rounds=2] [libs=floor-fifo,leasehold-native-fifo]

import { fileURLToPath } from 'node:url';
import { call, commandStats, startRedisServer } from '../../js-tests/support/redis.mjs';
import { createRedisLock } from '../adapters/redis.mjs';
import { engineEnv, readyThenWaitForGo, runAsChild, startFleet } from '../support/children.mjs';
import { connect } from '../support/redis-client.mjs';
import { median } from '../support/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const ENTER = `local t = redis.call('TIME')
return t[1] * 1000000 + t[2]`;
const STAMP = `local t = redis.call('TIME')
redis.call('RPUSH', KEYS[1], t[1] * 1000000 + t[2])
return 1`;

async function worker({ lib, port, key, count }) {
  const client = await connect(port);
  const lock = await createRedisLock(lib, { client, ttlMs: 10_000, waitMs: 60_000 });
  const body = (k, enters) => async () => {
    enters.push(Number(await client.eval(ENTER, 0)));
    client.eval(STAMP, 1, `${k}:releases`).catch(() => {});
  };
  const own = `${key}:warm:${process.pid}`;
  const warm = body(own, []);
  for (let i = 0; i < 500; i++) await lock.run(own, warm);
  await readyThenWaitForGo();
  const enters = [];
  const run = body(key, enters);
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < count; i++) await lock.run(key, run);
  const cpu = process.cpuUsage(cpu0);
  await lock.close();
  client.disconnect();
  return { enters, cpuUs: cpu.user + cpu.system };
}

await runAsChild(worker);

const processes = Number(process.argv[2] ?? 8);
const perProcess = Number(process.argv[3] ?? 500);
const rounds = Number(process.argv[4] ?? 2);
const libs = (process.argv[5] ?? 'floor-fifo,leasehold-native-fifo').split(',');
const server = await startRedisServer();
try {
  for (let r = 0; r < rounds; r++) {
    for (const lib of libs) {
      await call(server.port, ['FLUSHALL']);
      const key = `handover:${lib}`;
      const payload = { lib, port: server.port, key, count: perProcess };
      const fleet = await startFleet(processes, SELF, payload, { env: engineEnv(lib), timeoutMs: 120_000 });
      await call(server.port, ['CONFIG', 'RESETSTAT']);
      for (const c of fleet) c.go();
      const outs = await Promise.all(fleet.map((c) => c.result));
      const stats = await commandStats(server.port);
      const enters = outs.flatMap((o) => o.enters).sort((a, b) => a - b);
      const releases = (await call(server.port, ['LRANGE', `${key}:releases`, '0', '-1'])).map(Number).sort((a, b) => a - b);
      const holding = [];
      const handover = [];
      for (let i = 0; i + 1 < enters.length; i++) {
        holding.push(releases[i] - enters[i]);
        handover.push(enters[i + 1] - releases[i]);
      }
      const n = enters.length;
      const cpu = outs.reduce((s, o) => s + o.cpuUs, 0) / n;
      const perSecond = (n / (enters[n - 1] - enters[0])) * 1e6;
      const commands = Object.entries(stats)
        .filter(([name]) => !['config|resetstat', 'flushall', 'info', 'lrange'].includes(name))
        .map(([name, s]) => `${name} ${(s.calls / n).toFixed(2)}`)
        .join(', ');
      console.log(
        `${lib.padEnd(22)} ${Math.round(perSecond)}/s  holding p50 ${median(holding)} µs  handover p50 ${median(handover)} µs  fleet CPU ${Math.round(cpu)} µs per acquisition`,
      );
      console.log(`${''.padEnd(22)} Redis commands per acquisition: ${commands}`);
    }
  }
} finally {
  await server.stop();
}
