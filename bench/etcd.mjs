// Child process for the etcd columns of scenarios 4 and 5 (see run.mjs). One JSON line out.
//
//   node bench/etcd.mjs '{"scenario":"uncontended","lib":"etcd3-lock","params":{...}}'
//
// Every loop is bounded by its count and by a deadline.

import { Etcd3 } from 'etcd3';
import { setTimeout as sleep } from 'node:timers/promises';
import { createEtcdLock } from './adapters/etcd.mjs';
import { readyThenWaitForGo } from './support/children.mjs';
import { gaps, quantiles } from './support/stats.mjs';
import { machineNow } from './support/clock.mjs';

const noop = async () => 0;

async function roundTrip(client, count = 500) {
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await client.get('bench:rtt');
    stamps[i + 1] = performance.now();
  }
  return quantiles(gaps(stamps, count)).p50;
}

/** Scenario 4 on etcd: `count` sequential executions on one key, nobody else around. */
async function uncontended(lib, { endpoints, count, warmup, ttlMs }) {
  const client = new Etcd3({ hosts: endpoints });
  const lock = await createEtcdLock(lib, { client, ttlMs, waitMs: 0 });
  const key = `bench:uncontended:${lib}`;
  for (let i = 0; i < warmup; i++) await lock.run(key, noop);
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await lock.run(key, noop);
    stamps[i + 1] = performance.now();
  }
  const elapsedMs = stamps[count] - stamps[0];
  const { p50, p99 } = quantiles(gaps(stamps, count));
  const rttMs = await roundTrip(client);
  await lock.close();
  client.close();
  return { opsPerSec: (count / elapsedMs) * 1000, p50, p99, rttMs };
}

/** Resolves once `parties` processes have put their key under `${name}/`. */
async function meet(client, name, parties, timeoutMs = 60_000) {
  await client.put(`${name}/${process.pid}`).value('1');
  const deadline = performance.now() + timeoutMs;
  while ((await client.getAll().prefix(`${name}/`).count()) < parties) {
    if (performance.now() > deadline) throw new Error(`${name}: not all ${parties} processes arrived`);
    await sleep(2);
  }
}

/**
 * Scenario 5 on etcd, one member of the fleet: up to `count` executions on the shared
 * key, stopping new ones after `deadlineMs`. Inside the lock, one round trip: a put of
 * the last holder's name with its previous value (to count a process following
 * itself). Exclusion is checked afterwards from the holders' intervals (entered, left;
 * one machine, one clock): each process returns its own. Warm-up as in the Redis
 * scenario: alone on a key of its own, then with the fleet on another shared key.
 */
async function contendedWorker(lib, { endpoints, key, count, processes, warmup, contendedWarmup, deadlineMs, ttlMs, waitMs, thinkMs = 0 }) {
  const client = new Etcd3({ hosts: endpoints });
  const lock = await createEtcdLock(lib, { client, ttlMs, waitMs });
  const me = `${process.pid}`;
  const errors = [];
  const body = (lastKey, onLast) => async () => {
    const reply = await client.kv.put({ key: Buffer.from(lastKey), value: Buffer.from(me), prev_kv: true });
    onLast(reply.prev_kv?.value?.toString());
  };
  const own = `${key}:warm:${me}`;
  const warmBody = body(`${own}:last`, () => {});
  for (let i = 0; i < warmup; i++) await lock.run(own, warmBody);
  await readyThenWaitForGo();
  const shared = `${key}:warm`;
  const warmShared = body(`${shared}:last`, () => {});
  const warmDeadline = performance.now() + deadlineMs;
  for (let i = 0; i < contendedWarmup && performance.now() < warmDeadline; i++) {
    try {
      await lock.run(shared, warmShared);
    } catch (error) {
      errors.push(`warm-up: ${error?.name}: ${error?.message}`);
    }
    if (thinkMs > 0) await sleep(thinkMs);
  }
  await meet(client, `${key}:measure`, processes);
  let followedSelf = 0;
  const enter = body(`${key}:last`, (last) => {
    if (last === me) followedSelf += 1;
  });
  const waits = [];
  const intervals = [];
  let completed = 0;
  const at = machineNow;
  const startedAt = at();
  const cpu0 = process.cpuUsage();
  const deadline = performance.now() + deadlineMs;
  for (let i = 0; i < count && performance.now() < deadline; i++) {
    const asked = performance.now();
    try {
      await lock.run(key, async () => {
        const entered = at();
        waits.push(performance.now() - asked);
        await enter();
        intervals.push([entered, at()]);
      });
      completed += 1;
    } catch (error) {
      errors.push(`${error?.name}: ${error?.message}`);
    }
    if (thinkMs > 0) await sleep(thinkMs);
  }
  const endedAt = at();
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  await lock.close();
  client.close();
  return { completed, followedSelf, cpuMs, waits, intervals, errors: errors.slice(0, 5), errorCount: errors.length, startedAt, endedAt };
}

const SCENARIOS = { uncontended, contendedWorker };

const { scenario, lib, params } = JSON.parse(process.argv[2]);
process.on('unhandledRejection', (reason) => {
  process.stderr.write(`unhandled rejection in ${lib} ${scenario}: ${reason?.stack ?? reason}\n`);
});
const result = await SCENARIOS[scenario](lib, params);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
