// Real etcd servers for tests: a single member, or a cluster of three that can lose a
// member (its process killed) and get it back, all on 127.0.0.1 with free ports, data
// under os.tmpdir() (or /dev/shm, where WAL fsyncs cost nothing). Nothing is mocked.
// Missing `etcd` is an error, never a skip: `npm run setup` installs it.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './net.mjs';
import { killOnExit } from './reaper.mjs';

const HOST = '127.0.0.1';

let checked = false;
/** Throws a clear error when `etcd` is not installed. */
export function requireEtcdBinary() {
  if (checked) return;
  const r = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error(
      `etcd is not installed or not on PATH (${r.error?.code ?? `exit ${r.status}`}). ` +
        'The etcd store tests need a real server: run `npm run setup` (or `apt-get install -y etcd-server`).',
    );
  }
  checked = true;
}

function dataRoot() {
  return existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
}

/** GET /health on a member's client URL: true when it answers healthy (a leader exists). */
async function healthy(url) {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1_000) });
    const body = await res.json();
    return body.health === 'true';
  } catch {
    return false;
  }
}

async function until(what, check, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() > deadline) throw new Error(`etcd: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts `size` members (1 or 3) as one cluster. Returns { endpoints, members, stop() },
 * each member { name, url, kill(), start(), pause(), resume(), running }.
 */
export async function startEtcdCluster(size = 1, options = {}) {
  requireEtcdBinary();
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(size, options);
    } catch (err) {
      // A member that exited while starting (its port taken after it was picked) is
      // the only failure worth a second try; a cluster that never elects is not.
      if (attempt >= 3 || !err.memberExited) throw err;
    }
  }
}

async function startOnce(size, { heartbeatMs = 50, electionMs = 500 }) {
  const dir = mkdtempSync(path.join(dataRoot(), 'leasehold-etcd-'));
  const members = [];
  for (let i = 0; i < size; i++) {
    members.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort() });
  }
  const initialCluster = members.map((m) => `${m.name}=http://${HOST}:${m.peerPort}`).join(',');
  for (const m of members) {
    m.url = `http://${HOST}:${m.clientPort}`;
    m.child = null;
    m.args = [
      '--name', m.name,
      '--data-dir', path.join(dir, m.name),
      '--listen-client-urls', m.url,
      '--advertise-client-urls', m.url,
      '--listen-peer-urls', `http://${HOST}:${m.peerPort}`,
      '--initial-advertise-peer-urls', `http://${HOST}:${m.peerPort}`,
      '--initial-cluster', initialCluster,
      '--initial-cluster-state', 'new',
      '--initial-cluster-token', path.basename(dir),
      '--heartbeat-interval', String(heartbeatMs),
      '--election-timeout', String(electionMs),
      '--log-level', 'error',
      '--logger', 'zap',
    ];
    m.stderr = '';
    m.start = () => {
      const child = spawn('etcd', m.args, { stdio: ['ignore', 'ignore', 'pipe'] });
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (text) => (m.stderr = (m.stderr + text).slice(-2000)));
      killOnExit(child);
      m.child = child;
    };
    /** SIGKILL: no goodbye to the other members. */
    m.kill = async () => {
      const child = m.child;
      m.child = null;
      if (child === null || child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    };
    /** SIGSTOP and SIGCONT: a member that answers nothing, then carries on. */
    m.pause = () => m.child?.kill('SIGSTOP');
    m.resume = () => m.child?.kill('SIGCONT');
    Object.defineProperty(m, 'running', { get: () => m.child !== null });
  }
  for (const m of members) m.start();
  try {
    await until('a healthy cluster', async () => {
      const gone = members.find((m) => m.child.exitCode !== null || m.child.signalCode !== null);
      if (gone !== undefined) {
        const err = new Error(`etcd: member ${gone.name} exited while starting: ${gone.stderr.trim().slice(-500)}`);
        err.memberExited = true;
        throw err;
      }
      return (await Promise.all(members.map((m) => healthy(m.url)))).every(Boolean);
    }, 60_000);
  } catch (err) {
    for (const m of members) await m.kill();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    endpoints: members.map((m) => `${HOST}:${m.clientPort}`),
    members,
    /** The member that is leader now (asked of each running member's status). */
    async leader() {
      for (const m of members.filter((x) => x.running)) {
        const status = await memberStatus(m.url);
        if (status !== undefined && status.leader === status.self) return m;
      }
      return undefined;
    },
    /** Resolves once the running members agree on a leader again. */
    async healthy(timeoutMs = 10_000) {
      await until('a leader', async () => (await Promise.all(members.filter((m) => m.running).map((m) => healthy(m.url)))).every(Boolean), timeoutMs);
    },
    async stop() {
      for (const m of members) await m.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A member's own id and its leader's id, from the gRPC gateway's maintenance status. */
async function memberStatus(url) {
  try {
    const res = await fetch(`${url}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(1_000) });
    const body = await res.json();
    return { self: body.header.member_id, leader: body.leader };
  } catch {
    return undefined;
  }
}
