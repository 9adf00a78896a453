// Redis topologies that fail over, for the failover tests: a primary with replicas
// watched by Sentinels, and a Redis Cluster whose masters have a replica each. All on
// 127.0.0.1, files under os.tmpdir(), every process killed on exit (support/reaper.mjs).
// `down-after-milliseconds` and `cluster-node-timeout` are short (1 s), so a SIGKILLed
// primary is replaced in a few seconds. Missing `redis-sentinel` is an error, never a
// skip: `npm run setup` installs it.

import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { call, command, freePort, requireRedisBinaries, spawnClusterNode, spawnServer, stopProcess, waitFor } from './redis.mjs';
import { killOnExit } from './reaper.mjs';

const HOST = '127.0.0.1';
export const DOWN_AFTER_MS = 1000;

const alive = (proc) => proc.child.exitCode === null && proc.child.signalCode === null;

function requireSentinel() {
  const r = spawnSync('redis-sentinel', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error(
      `redis-sentinel is not installed or not on PATH (${r.error?.code ?? `exit ${r.status}`}): ` +
        'run `npm run setup` (or `apt-get install -y redis-sentinel`).',
    );
  }
}

/** Starts `redis-sentinel <conf>`; resolves once it answers PING. */
async function spawnSentinel(port, dir, conf) {
  const file = path.join(dir, `sentinel-${port}.conf`);
  writeFileSync(file, conf);
  const child = killOnExit(spawn('redis-sentinel', [file], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  const collect = (chunk) => {
    output = (output + chunk.toString('utf8')).slice(-8000);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await waitFor(`redis-sentinel on port ${port} to answer PING`, async () => {
    if (child.exitCode !== null) throw new Error(`redis-sentinel exited early:\n${output}`);
    return (await command(port, ['PING'], { timeoutMs: 500 })) === 'PONG';
  }, { timeoutMs: 10_000, intervalMs: 25 });
  return { child, exited, get output() { return output; } };
}

/** Whether the server on `port` is a primary with `replicas` replicas online. */
async function replicasOnline(port, replicas) {
  const text = await call(port, ['INFO', 'replication']);
  const online = text.split('\r\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
  return /role:master/.test(text) && online >= replicas;
}

/**
 * A primary, `replicas` replicas and `sentinels` Sentinels (quorum: a majority) watching
 * it under `name`. Resolves once every Sentinel knows every replica and every other
 * Sentinel (a failover needs their votes). Returns { name, sentinels: [{ host, port }],
 * primaryPort(), killPrimary(), isolatePrimary(), waitForNewPrimary(oldPort), stop() }.
 */
export async function startSentinelGroup({ replicas = 2, sentinels = 3, name = 'leasehold' } = {}) {
  requireRedisBinaries();
  requireSentinel();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'leasehold-sentinel-'));
  const servers = new Map(); // port -> process
  const watchers = [];
  const stop = async () => {
    try {
      await Promise.all([...watchers, ...servers.values()].map(stopProcess));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const serverDir = (port) => {
    const d = path.join(dir, String(port));
    mkdirSync(d);
    return d;
  };
  try {
    const primary = await freePort();
    servers.set(primary, await spawnServer(primary, serverDir(primary), []));
    for (let i = 0; i < replicas; i++) {
      const port = await freePort();
      servers.set(port, await spawnServer(port, serverDir(port), ['--replicaof', HOST, String(primary)]));
    }
    await waitFor(`${replicas} replicas online`, () => replicasOnline(primary, replicas), { timeoutMs: 20_000, intervalMs: 50 });
    const quorum = Math.floor(sentinels / 2) + 1;
    for (let i = 0; i < sentinels; i++) {
      const port = await freePort();
      const conf = [
        `port ${port}`,
        `bind ${HOST}`,
        `dir ${dir}`,
        'logfile ""',
        `sentinel monitor ${name} ${HOST} ${primary} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${name} 10000`,
        `sentinel parallel-syncs ${name} ${replicas}`,
        '',
      ].join('\n');
      watchers.push(await spawnSentinel(port, dir, conf));
      watchers.at(-1).port = port;
    }
    await waitFor('every Sentinel to know the replicas and the other Sentinels', async () => {
      for (const s of watchers) {
        if ((await call(s.port, ['SENTINEL', 'REPLICAS', name])).length < replicas) return false;
        if ((await call(s.port, ['SENTINEL', 'SENTINELS', name])).length < sentinels - 1) return false;
      }
      return true;
    }, { timeoutMs: 30_000, intervalMs: 100 });
  } catch (err) {
    await stop();
    throw err;
  }
  const group = {
    name,
    sentinels: watchers.map((s) => ({ host: HOST, port: s.port })),
    /**
     * The primary's port: the first a Sentinel names that answers as a primary (one
     * Sentinel may still name the old one for a moment after a failover).
     */
    async primaryPort() {
      for (const s of watchers) {
        try {
          const [, text] = await call(s.port, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name]);
          const port = Number(text);
          if ((await call(port, ['ROLE'], { timeoutMs: 500 }))[0] === 'master') return port;
        } catch {
          // that Sentinel or the server it names does not answer: the next one
        }
      }
      throw new Error('no Sentinel names a primary that answers');
    },
    /** The replicas' ports (of the current primary). */
    replicaPorts(primary) {
      return [...servers.keys()].filter((p) => p !== primary && alive(servers.get(p)));
    },
    /** SIGKILLs the current primary; resolves to its port once it is gone. */
    async killPrimary() {
      const port = await group.primaryPort();
      const proc = servers.get(port);
      proc.child.kill('SIGKILL');
      await proc.exited;
      return port;
    },
    /**
     * Cuts the primary off its replicas (they reconnect after a second): writes made
     * right after this reach no replica, as when a primary dies before replicating.
     */
    async isolatePrimary() {
      const port = await group.primaryPort();
      for (const r of group.replicaPorts(port)) await call(r, ['CONFIG', 'SET', 'masterauth', 'not-the-password']);
      await call(port, ['CLIENT', 'KILL', 'TYPE', 'replica']);
      return port;
    },
    /** Lets replicas cut off by `isolatePrimary` sync again. */
    async rejoinReplicas() {
      for (const [port, proc] of servers) {
        if (alive(proc)) await call(port, ['CONFIG', 'SET', 'masterauth', '']);
      }
    },
    /** Resolves once the current primary has `count` replicas online. */
    async waitForReplicas(count) {
      await waitFor(`${count} replicas online`, async () => replicasOnline(await group.primaryPort(), count), { timeoutMs: 30_000, intervalMs: 50 });
    },
    /** Resolves to the promoted primary's port once the Sentinels name one other than `oldPort` and it acts as one. */
    async waitForNewPrimary(oldPort, { timeoutMs = 30_000 } = {}) {
      return waitFor('a promoted primary', async () => {
        const port = await group.primaryPort();
        return port === oldPort ? false : port;
      }, { timeoutMs, intervalMs: 50 });
    },
    stop,
  };
  return group;
}

/**
 * A Redis Cluster of `masters` masters with one replica each, `cluster-node-timeout`
 * 1 s. Returns { nodes, masterFor(name) -> port, killNode(port), waitForPromotion(port),
 * stop() }.
 */
export async function startReplicatedCluster({ masters = 3 } = {}) {
  requireRedisBinaries();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'leasehold-redis-replicated-'));
  const servers = new Map();
  const stop = async () => {
    try {
      await Promise.all([...servers.values()].map(stopProcess));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const ports = [];
  try {
    const taken = new Set();
    for (let i = 0; i < masters * 2; i++) {
      const { port, proc } = await spawnClusterNode(taken, dir, (p) => [
        '--cluster-enabled', 'yes',
        '--cluster-config-file', path.join(dir, `nodes-${p}.conf`),
        '--cluster-node-timeout', String(DOWN_AFTER_MS),
        '--dbfilename', `dump-${p}.rdb`,
      ]);
      ports.push(port);
      servers.set(port, proc);
    }
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', '1', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.error || create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed (${create.error?.message ?? `exit ${create.status}`}):\n${create.stdout}${create.stderr}`);
    }
    await waitFor('cluster_state:ok, every node known, every master with a replica online', async () => {
      for (const port of ports) {
        const text = await call(port, ['CLUSTER', 'INFO']);
        if (!/cluster_state:ok/.test(text) || !new RegExp(`cluster_known_nodes:${masters * 2}\\b`).test(text)) return false;
      }
      const primaries = await masterPorts(ports[0]);
      if (primaries.length !== masters) return false;
      for (const p of primaries) if (!(await replicasOnline(p, 1))) return false;
      return true;
    }, { timeoutMs: 30_000, intervalMs: 100 });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    nodes: ports.map((port) => ({ host: HOST, port })),
    /** The port of the master serving `name`'s slot, asked of a live node. */
    async masterFor(name) {
      for (const port of ports) {
        if (!alive(servers.get(port))) continue;
        const slot = await call(port, ['CLUSTER', 'KEYSLOT', name]);
        const ranges = await call(port, ['CLUSTER', 'SLOTS']);
        const r = ranges.find(([from, to]) => slot >= from && slot <= to);
        return Number(r[2][1]);
      }
      throw new Error('no live cluster node');
    },
    async killNode(port) {
      const proc = servers.get(port);
      proc.child.kill('SIGKILL');
      await proc.exited;
    },
    /** Resolves to the port that serves `name` once it is a live master other than `oldPort`. */
    async waitForPromotion(name, oldPort, { timeoutMs = 30_000 } = {}) {
      return waitFor(`a replica promoted in place of ${oldPort}`, async () => {
        const port = await this.masterFor(name);
        if (port === oldPort) return false;
        const text = await call(port, ['CLUSTER', 'INFO']);
        return /cluster_state:ok/.test(text) ? port : false;
      }, { timeoutMs, intervalMs: 100 });
    },
    stop,
  };
}

/** The ports of the masters that serve slots, as `port` sees the cluster. */
async function masterPorts(port) {
  const ranges = await call(port, ['CLUSTER', 'SLOTS']);
  return [...new Set(ranges.map((r) => Number(r[2][1])))];
}

export { sleep };
