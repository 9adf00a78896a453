// Child processes of the benchmark: each prints JSON lines on stdout. A line
// {"ready":true} says it is set up and waits for a line on stdin (so that a fleet starts
// together); its last line is its result. Every child is killed at its timeout, and on
// exit of this process whatever happened.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const live = new Set();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * Starts `node [nodeArgs] script JSON.stringify(payload)`. Returns
 * `{ ready, go(), result }`: `ready` resolves on the child's ready line, `go()` writes
 * the start line, `result` resolves to its last JSON line once it exits with status 0.
 */
export function startChild(script, payload, { env = {}, nodeArgs = [], timeoutMs = 120_000 } = {}) {
  const child = spawn(process.execPath, [...nodeArgs, script, JSON.stringify(payload)], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  let stdout = '';
  let stderr = '';
  let readyResolve;
  const ready = new Promise((resolve) => {
    readyResolve = resolve;
  });
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    if (stdout.includes('{"ready":true}')) readyResolve();
  });
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const result = new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      const lines = stdout.trim().split('\n').filter(Boolean);
      const last = lines[lines.length - 1];
      if (code === 0 && last) {
        try {
          resolve(JSON.parse(last));
          return;
        } catch {
          // fall through to the error below
        }
      }
      const why = signal ? `killed by ${signal}${signal === 'SIGKILL' ? ` (timeout ${timeoutMs} ms?)` : ''}` : `exit ${code}`;
      reject(new Error(`${script} ${JSON.stringify(payload)}: ${why}\n${stderr}`));
    });
  });
  result.catch(() => {}); // observed by the caller; never an unhandled rejection here
  return {
    ready,
    result,
    go() {
      child.stdin.write('go\n');
      child.stdin.end();
    },
  };
}

/**
 * Starts `count` children of `script`, each with `payload` and `options`, and resolves
 * to them once every one is ready; rejects as soon as one fails instead (a child that
 * dies before its ready line would otherwise be waited for forever).
 */
export async function startFleet(count, script, payload, options) {
  const fleet = Array.from({ length: count }, () => startChild(script, payload, options));
  await Promise.race([Promise.all(fleet.map((c) => c.ready)), Promise.all(fleet.map((c) => c.result))]);
  return fleet;
}

/** Runs one child to its end and resolves to its result. */
export function runChild(script, payload, options) {
  const child = startChild(script, payload, options);
  return child.result;
}

/**
 * The environment that runs library `lib` on its engine: a leasehold library is named
 * 'leasehold-<engine>', or 'leasehold-<engine>-<variant>' ('leasehold-native-fifo').
 */
export function engineEnv(lib) {
  return lib.startsWith('leasehold-') ? { LEASEHOLD_ENGINE: lib.split('-')[1] } : {};
}

/** The child's side of `startChild`: says it is ready, then waits for the start line. */
export async function readyThenWaitForGo() {
  const lines = createInterface({ input: process.stdin });
  const go = new Promise((resolve) => lines.once('line', resolve));
  process.stdout.write('{"ready":true}\n');
  await go;
  lines.close();
}

/**
 * The child's side of `startChild` for a script that is also run by hand: when this
 * process was started with a JSON payload, runs `main(payload)`, prints its result as the
 * last line and exits; otherwise returns at once.
 */
export async function runAsChild(main) {
  if (!process.argv[2]?.startsWith('{')) return;
  const out = await main(JSON.parse(process.argv[2]));
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}
