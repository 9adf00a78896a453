// Test side of the election fleets: a fenced resource outside the store, and five
// candidate processes (support/election-worker.mjs) campaigning on one key.
//
// The resource is an HTTP server in the test process. It accepts a write whose term is at
// least the largest it has accepted and refuses the rest, as a database row with a fence
// column would, and keeps every attempt in arrival order.

import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { killOnExit } from './reaper.mjs';
import { startFleetWorker, FLEET_READY_MS } from './fleet.mjs';
import { onLines } from './lines.mjs';
import { within } from './async.mjs';

const WORKER = fileURLToPath(new URL('./election-worker.mjs', import.meta.url));

/** Starts the resource; resolves { url, attempts, maxTerm(), acceptedAfter(t), close() }. */
export async function startFencedResource() {
  const attempts = [];
  let max = -Infinity;
  const waiters = new Set();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const { pid, name, term, late, checked } = JSON.parse(body);
      const accepted = term >= max;
      if (accepted) max = term;
      const attempt = { pid, name, term, late, checked, accepted, at: performance.now() };
      attempts.push(attempt);
      for (const waiter of [...waiters]) waiter(attempt);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ accepted }));
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    attempts,
    maxTerm: () => max,
    /** Resolves the first accepted write for which `test(attempt)` holds, from now on. */
    next(test) {
      return new Promise((resolve) => {
        const waiter = (attempt) => {
          if (attempt.accepted && test(attempt)) {
            waiters.delete(waiter);
            resolve(attempt);
          }
        };
        waiters.add(waiter);
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}

/**
 * Starts `count` candidates on `kind` at `address`, each named `c<i>`, and lets them go.
 * Resolves { workers: [{ child, pid, name, events }], stop() }.
 */
export async function startCandidates({ kind, address, key, ttl, resource, count = 5 }) {
  const workers = [];
  for (let i = 0; i < count; i++) {
    const name = `c${i}`;
    const worker = startFleetWorker(WORKER, [kind, address, key, String(ttl), resource.url, name], name);
    killOnExit(worker.child);
    // Candidates never print a result: they are killed (by a scenario or stop()).
    worker.result.catch(() => {});
    worker.name = name;
    worker.pid = worker.child.pid;
    worker.events = [];
    // Lines after "ready" ({"elected"}, {"deposed"}), kept in order.
    onLines(worker.child.stdout, (line) => {
      const message = JSON.parse(line);
      if (!message.ready) worker.events.push({ ...message, at: performance.now() });
    });
    workers.push(worker);
  }
  await within(FLEET_READY_MS, 'the candidates to connect', Promise.all(workers.map((w) => w.ready)));
  for (const worker of workers) worker.go();
  return {
    workers,
    byPid: (pid) => workers.find((w) => w.pid === pid),
    async stop() {
      for (const worker of workers) {
        if (worker.child.exitCode === null && worker.child.signalCode === null) {
          worker.child.kill('SIGCONT');
          worker.child.kill('SIGKILL');
        }
      }
      await Promise.all(workers.map((w) => w.exited));
    },
  };
}

/**
 * What must hold of every fleet run: each term was accepted from one process only (never
 * two leaders with one term), no write a leader made while its signal was live was refused
 * (exactly one acting at a time) outside the `forgotten` windows and but for writes
 * `inFlight` (sent after a stop by a tick that read its signal before it), and every late
 * write made
 * with an older term than the
 * resource had accepted was refused.
 */
export function checkFencing(assert, attempts, forgotten = [], inFlight = () => false) {
  const holder = new Map();
  for (const a of attempts.filter((x) => x.accepted)) {
    const seen = holder.get(a.term);
    assert.ok(seen === undefined || seen === a.pid, `term ${a.term} was accepted from two processes: ${seen} and ${a.pid}`);
    holder.set(a.term, a.pid);
  }
  // While a store that lost its data has forgotten the lease (`forgotten`: [from, to]
  // windows), its old leader acts until its next renewal tells it: only the fence stops it.
  const inForgotten = (a) => forgotten.some(([from, to]) => a.at >= from && a.at <= to);
  const refusedLive = attempts.filter((a) => !a.late && !a.accepted && !inForgotten(a) && !inFlight(a));
  assert.deepEqual(refusedLive, [], 'a leader whose signal was live had a write refused: two acted at once');
  let max = -Infinity;
  for (const a of attempts) {
    if (a.late && a.term < max) assert.equal(a.accepted, false, `a deposed leader's late write (term ${a.term}) was accepted`);
    if (a.accepted) max = Math.max(max, a.term);
  }
  return holder;
}
