// The failover scenario of the Redis failover tests: one process holds a key and three
// wait for it (support/failover-worker.mjs) when the test kills the primary that serves
// it. The processes write to a fenced resource kept here: a write is accepted only with
// a token at least the largest accepted so far. What the test then asserts comes back
// as figures: holds (token, start and end on this clock), rejected writes, when
// locking resumed, and how each process ended.

import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { within } from './async.mjs';
import { killOnExit } from './reaper.mjs';

const WORKER = fileURLToPath(new URL('./failover-worker.mjs', import.meta.url));

/** The resource outside Redis: accepts writes in token order only. */
export class FencedResource {
  maxToken = 0;
  accepted = [];
  rejected = [];
  holds = new Map(); // token -> { token, who, start, end }
  duplicates = []; // a token that started two holds

  write(who, { token, phase }) {
    const at = performance.now();
    if (phase === 'start' && this.holds.has(token)) this.duplicates.push({ who, token });
    if (phase === 'start') this.holds.set(token, { token, who, start: at, end: undefined });
    else if (this.holds.has(token)) this.holds.get(token).end = at;
    if (token < this.maxToken) {
      this.rejected.push({ who, token, phase, at });
      return false;
    }
    this.maxToken = token;
    this.accepted.push({ who, token, phase, at });
    return true;
  }
}

function startWorker(settings, who, resource) {
  const child = killOnExit(fork(WORKER, [JSON.stringify(settings)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] }));
  let stderr = '';
  child.stderr.on('data', (c) => {
    stderr += c;
  });
  let onReady;
  let onResult;
  const ready = new Promise((resolve) => {
    onReady = resolve;
  });
  const result = new Promise((resolve) => {
    onResult = resolve;
  });
  child.on('message', (m) => {
    if (m.ready) onReady();
    else if (m.result) onResult(m.result);
    else if (m.write) child.send({ answer: m.write.id, accepted: resource.write(who, m.write) });
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  exited.then(() => {
    onReady();
    onResult(undefined);
  });
  return { child, ready, result, exited, stderr: () => stderr };
}

/**
 * Runs the scenario. `settings`: the workers' connection settings (kind, topology and
 * sentinels/name or nodes) and key; `kill()` kills the serving primary and resolves
 * to { promotedAt } (performance.now() when a replica serves again).
 */
export async function runFailover(settings, kill, { ttl = 1500, boundMs = 90_000 } = {}) {
  const resource = new FencedResource();
  const base = { ...settings, ttl, deadlineMs: 40_000 };
  const holder = startWorker({ ...base, executions: 1, holdMs: 3 * ttl }, 'holder', resource);
  const waiters = [1, 2, 3].map((i) => startWorker({ ...base, executions: 2, holdMs: 100 }, `waiter ${i}`, resource));
  const all = [holder, ...waiters];
  try {
    await within(30_000, 'every worker connected', Promise.all(all.map((w) => w.ready)));
    holder.child.send('go');
    await within(20_000, 'the holder holds', (async () => {
      while (resource.holds.size === 0) await new Promise((r) => setTimeout(r, 10));
    })());
    for (const w of waiters) w.child.send('go');
    await new Promise((r) => setTimeout(r, 200)); // the waiters ask, find it held, wait
    const killedAt = performance.now();
    const { promotedAt } = await kill();
    const results = await within(boundMs, 'every worker done', Promise.all(all.map((w) => w.result)));
    const exits = await within(20_000, 'every worker exited on its own', Promise.all(all.map((w) => w.exited))).catch((err) => {
      const alive = all.filter((w) => w.child.exitCode === null && w.child.signalCode === null).length;
      throw new Error(`${err.message} (${alive} still running)\n${all.map((w) => w.stderr()).join('\n')}`);
    });
    const holds = [...resource.holds.values()].sort((a, b) => a.start - b.start);
    const after = holds.find((h) => h.start > killedAt);
    return {
      resource,
      holds,
      results,
      exits,
      stderr: all.map((w) => w.stderr()),
      failoverMs: promotedAt - killedAt,
      resumedMs: after === undefined ? Infinity : after.start - killedAt,
    };
  } finally {
    for (const w of all) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }
}

/**
 * The fencing invariant on the holds the resource saw: tokens are distinct, and a hold
 * that began after another ended has the larger token. Returns the violations.
 */
export function fencingViolations(holds) {
  const out = [];
  for (const a of holds) {
    for (const b of holds) {
      if (a === b) continue;
      if (a.end !== undefined && a.end < b.start && !(a.token < b.token)) {
        out.push(`${b.who}'s token ${b.token} is not above ${a.who}'s ${a.token}, which ended before it began`);
      }
    }
  }
  return out;
}
