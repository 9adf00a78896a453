// The fleet tests (redis-engine.test.mjs, postgres-store.test.mjs): separate Node
// processes (support/redis-worker.mjs, support/postgres-worker.mjs) taking one lock key
// many times each. Both sides of their protocol on stdio, one JSON object a line: the
// worker prints {"ready":true,...} once connected, starts when a line arrives on its
// stdin (so the fleet starts together), and prints its result at the end.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { onLines } from './lines.mjs';
import { deferred } from './time.mjs';

const noop = () => {};

// How long a fleet may take to start (every worker connected) and to finish its work.
// They only catch a hang: the fleet tests assert exclusion and tokens, not speed. On a
// loaded 2-core machine (CI: two test files at once, two busy processes beside the
// fleet) eight Node processes starting, and 1600 executions between them, took 26 s.
export const FLEET_READY_MS = 60_000;
export const FLEET_DONE_MS = 120_000;

/**
 * Test side: starts `node <script> ...args`; resolves its `ready` and `result` lines.
 * Both reject when the worker exits before printing them (`worker <name> exited ...`).
 */
export function startFleetWorker(script, args, name) {
  const who = name === undefined ? 'worker' : `worker ${name}`;
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
  const ready = deferred();
  const result = deferred();
  let stderr = '';
  onLines(child.stdout, (line) => {
    const message = JSON.parse(line);
    if (message.ready) ready.resolve(message);
    else result.resolve(message);
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk.toString('utf8');
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const failed = exited.then(({ code, signal }) => {
    throw new Error(`${who} exited (${code ?? signal}) before reporting:\n${stderr}`);
  });
  failed.catch(noop);
  return {
    child,
    exited,
    ready: Promise.race([ready.promise, failed]),
    result: Promise.race([result.promise, failed]),
    go: () => child.stdin.end('go\n'),
  };
}

/** Worker side: prints `{"ready":true, ...ready}` and resolves when a line arrives on stdin. */
export async function readyThenGo(ready) {
  const lines = createInterface({ input: process.stdin });
  const go = new Promise((resolve) => lines.once('line', resolve));
  process.stdout.write(`${JSON.stringify({ ready: true, ...ready })}\n`);
  await go;
  lines.close();
}

/**
 * Worker side: `count` executions of `pipeline`, one after the other, each running
 * `section` (which resolves to the record of that run). Resolves { completed, records,
 * errors, elapsedMs }, with `describeError(error)` for each execution that failed.
 */
export async function executeTimes(count, pipeline, section, describeError) {
  let completed = 0;
  const records = [];
  const errors = [];
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    try {
      await pipeline.execute(async () => {
        records.push(await section());
      });
      completed += 1;
    } catch (error) {
      errors.push(describeError(error));
    }
  }
  return { completed, records, errors, elapsedMs: Math.round(performance.now() - started) };
}
