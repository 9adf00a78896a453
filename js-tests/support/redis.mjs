// Real Redis servers for tests: a standalone server that can be restarted on its port
// (losing its data), and a 3-master Redis Cluster, all on 127.0.0.1, all files under
// os.tmpdir(). Nothing is mocked. Missing `redis-server` is an error, never a skip:
// `npm run setup` (scripts/setup.sh) installs it.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pollUntil } from './async.mjs';
import { freePort, portIsFree, PORT_HIGH, PORT_LOW } from './net.mjs';
import { killOnExit } from './reaper.mjs';

export { freePort };

const HOST = '127.0.0.1';

let checked = false;
/** Throws a clear error when redis-server or redis-cli is not installed. */
export function requireRedisBinaries() {
  if (checked) return;
  for (const bin of ['redis-server', 'redis-cli']) {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) {
      throw new Error(
        `${bin} is not installed or not on PATH (${r.error?.code ?? `exit ${r.status}`}). ` +
          'The Redis store tests need a real server: run `npm run setup` ' +
          '(or `apt-get install -y redis-server`).',
      );
    }
  }
  checked = true;
}

/** A port P with P and P + 10000 (the cluster bus port) both free. */
export async function freeClusterPort(taken) {
  for (let i = 0; i < 200; i++) {
    // P + 10000 stays below the kernel's ephemeral range too (see net.mjs).
    const port = PORT_LOW + Math.floor(Math.random() * (PORT_HIGH - 10000 - PORT_LOW));
    if (taken.has(port) || taken.has(port + 10000) || taken.has(port - 10000)) continue;
    if ((await portIsFree(port)) && (await portIsFree(port + 10000))) {
      taken.add(port);
      return port;
    }
  }
  throw new Error('no free port pair (P, P+10000) found for a cluster node');
}

/**
 * A cluster node on a free port pair, spawned as soon as the port is picked: another
 * test process may take a port between the check and the bind, so a node that finds
 * its port taken is started again on another. `argsOf(port)`: its extra arguments.
 */
export async function spawnClusterNode(taken, dir, argsOf) {
  for (let attempt = 1; ; attempt++) {
    const port = await freeClusterPort(taken);
    try {
      return { port, proc: await spawnServer(port, dir, argsOf(port)) };
    } catch (err) {
      if (attempt >= 5 || !/Address already in use/.test(err.message)) throw err;
    }
  }
}

// ---------------------------------------------------------------------------------
// A minimal RESP client: one command per connection, for test plumbing only.
// ---------------------------------------------------------------------------------

function encodeCommand(args) {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const s = String(a);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return parts.join('');
}

/** Parses one RESP2 reply at `pos`; undefined when `buf` does not hold it all yet. */
function parseReply(buf, pos) {
  const eol = buf.indexOf('\r\n', pos);
  if (eol === -1) return undefined;
  const type = String.fromCharCode(buf[pos]);
  const line = buf.toString('utf8', pos + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+':
      return [line, next];
    case '-': {
      const err = new Error(line);
      err.isReplyError = true;
      return [err, next];
    }
    case ':':
      return [Number(line), next];
    case '$': {
      const len = Number(line);
      if (len === -1) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString('utf8', next, next + len), next + len + 2];
    }
    case '*': {
      const len = Number(line);
      if (len === -1) return [null, next];
      const items = [];
      let at = next;
      for (let i = 0; i < len; i++) {
        const r = parseReply(buf, at);
        if (r === undefined) return undefined;
        items.push(r[0]);
        at = r[1];
      }
      return [items, at];
    }
    default:
      throw new Error(`unexpected RESP type ${JSON.stringify(type)}`);
  }
}

/**
 * Sends one command on a fresh connection and resolves to its reply (an Error object
 * for an error reply). Rejects on connection errors and after `timeoutMs`.
 */
export function command(port, args, { timeoutMs = 2000 } = {}) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const socket = net.connect({ host: HOST, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis ${args[0]} on port ${port}: no reply in ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('connect', () => socket.write(encodeCommand(args)));
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let parsed;
      try {
        parsed = parseReply(buf, 0);
      } catch (err) {
        clearTimeout(timer);
        socket.destroy();
        reject(err);
        return;
      }
      if (parsed !== undefined) {
        clearTimeout(timer);
        socket.end();
        resolve(parsed[0]);
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      reject(new Error(`redis ${args[0]} on port ${port}: connection closed before a reply`));
    });
  });
}

/** `command`, throwing error replies. */
export async function call(port, args, opts) {
  const reply = await command(port, args, opts);
  if (reply instanceof Error) throw reply;
  return reply;
}

/** Polls `check` every `intervalMs` until it returns a truthy value; throws after `timeoutMs`. */
export function waitFor(what, check, { timeoutMs = 5000, intervalMs = 20 } = {}) {
  return pollUntil(what, check, { timeoutMs, intervalMs });
}

/** `INFO <section>` parsed into { field: value }. */
export async function info(port, section) {
  const text = await call(port, ['INFO', section]);
  const out = {};
  for (const line of text.split('\r\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.indexOf(':');
    out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** `INFO commandstats` as { command: { calls, failed_calls, ... } } (numbers). */
export async function commandStats(port) {
  const raw = await info(port, 'commandstats');
  const out = {};
  for (const [field, value] of Object.entries(raw)) {
    const stats = {};
    for (const pair of value.split(',')) {
      const [k, v] = pair.split('=');
      stats[k] = Number(v);
    }
    out[field.replace(/^cmdstat_/, '')] = stats;
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------

function tail(text, n = 2000) {
  return text.length > n ? `...${text.slice(-n)}` : text;
}

/** Starts redis-server in the foreground as a child; resolves once it answers PING (also for support/redis-failover.mjs). */
export async function spawnServer(port, dir, extraArgs) {
  const args = [
    '--port', String(port),
    '--bind', HOST,
    '--save', '',
    '--appendonly', 'no',
    '--daemonize', 'no',
    '--dir', dir,
    '--logfile', '',
    ...extraArgs,
  ];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  killOnExit(child);
  let output = '';
  const collect = (chunk) => {
    output = tail(output + chunk.toString('utf8'), 8000);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      resolve({ code, signal });
    });
  });
  child.on('error', (err) => {
    output += `\nspawn error: ${err.message}`;
  });
  let gone = false;
  exited.then(() => {
    gone = true;
  });
  try {
    await waitFor(`redis-server on port ${port} to answer PING`, async () => {
      if (gone) throw new Error(`redis-server exited early:\n${tail(output)}`);
      return (await command(port, ['PING'], { timeoutMs: 500 })) === 'PONG';
    }, { timeoutMs: 10_000, intervalMs: 25 });
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${err.message}\nredis-server output:\n${tail(output)}`, { cause: err.cause ?? err });
  }
  return {
    child,
    exited,
    get output() {
      return output;
    },
  };
}

export async function stopProcess(proc) {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  proc.child.kill('SIGTERM'); // with --save '' Redis exits without writing anything
  const done = await Promise.race([proc.exited, sleep(5000, undefined, { ref: false })]);
  if (done === undefined) {
    proc.child.kill('SIGKILL');
    await proc.exited;
  }
}

/**
 * Starts a standalone Redis on a free loopback port, without persistence.
 * Returns { port, url, stop(), restart() }; `restart` stops it and starts a fresh one
 * on the same port, so all data (and the script cache) is gone.
 */
export async function startRedisServer({ args = [] } = {}) {
  requireRedisBinaries();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'leasehold-redis-'));
  const port = await freePort();
  let proc;
  try {
    proc = await spawnServer(port, dir, args);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let stopped = false;
  return {
    port,
    host: HOST,
    url: `redis://${HOST}:${port}`,
    async restart() {
      await stopProcess(proc);
      proc = await spawnServer(port, dir, args);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await stopProcess(proc);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Starts a Redis Cluster of `masters` masters (no replicas) on loopback and waits until
 * every node reports cluster_state:ok and knows every other node.
 * Returns { nodes: [{ host, port }], ports, stop(), slotOwner(slot) -> port }.
 */
export async function startRedisCluster({ masters = 3 } = {}) {
  requireRedisBinaries();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'leasehold-redis-cluster-'));
  const procs = [];
  const ports = [];
  const stop = async () => {
    try {
      await Promise.all(procs.map(stopProcess));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    const taken = new Set();
    for (let i = 0; i < masters; i++) {
      const { port, proc } = await spawnClusterNode(taken, dir, (p) => [
        '--cluster-enabled', 'yes',
        '--cluster-config-file', path.join(dir, `nodes-${p}.conf`),
        '--cluster-node-timeout', '5000',
      ]);
      ports.push(port);
      procs.push(proc);
    }
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.error || create.status !== 0) {
      throw new Error(
        `redis-cli --cluster create failed (${create.error?.message ?? `exit ${create.status}`}):\n${tail(create.stdout + create.stderr)}`,
      );
    }
    await waitFor('cluster_state:ok on every node', async () => {
      for (const port of ports) {
        const text = await call(port, ['CLUSTER', 'INFO']);
        if (!/cluster_state:ok/.test(text)) return false;
        if (!new RegExp(`cluster_known_nodes:${masters}\\b`).test(text)) return false;
        if (!/cluster_slots_ok:16384\b/.test(text)) return false;
      }
      return true;
    }, { timeoutMs: 20_000, intervalMs: 50 });
  } catch (err) {
    await stop();
    throw err;
  }
  // slot ranges -> port, read once (the cluster does not change during tests)
  const ranges = (await call(ports[0], ['CLUSTER', 'SLOTS'])).map(([from, to, [, port]]) => ({ from, to, port }));
  return {
    ports,
    nodes: ports.map((port) => ({ host: HOST, port })),
    slotOwner(slot) {
      const r = ranges.find((x) => slot >= x.from && slot <= x.to);
      return r?.port;
    },
    /** The port of the master serving `name`'s slot. */
    async nodeFor(name) {
      const slot = await call(ports[0], ['CLUSTER', 'KEYSLOT', name]);
      return this.slotOwner(slot);
    },
    stop,
  };
}
