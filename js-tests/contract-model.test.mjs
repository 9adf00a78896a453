// The contract model (js-tests/model/): random plans over every way in (pipelines with
// fixed, operationKey and function keys, withLock, acquireLock released, extended,
// released twice, left to expire or auto-renewed, nested and two-lock executions, aborts
// at every stage, callbacks that throw, block the loop or never settle, linger) on every
// kind of store (the memory store; JS stores polled, announcing, granting, handing over
// locally), checked online: one holder per key, tokens rising per key, the caller's own
// token, no callback inside execute(), FIFO on the memory store, every promise settling
// with its documented result, a loss told before the next holder's `acquired`.
// A failure prints the seed and the shrunk plan. LEASEHOLD_MODEL_SEED picks the seed,
// LEASEHOLD_MODEL_MS the time per clock (default 2000); `npm run soak` runs long ones.
// Run: node --test js-tests/contract-model.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { explore } from './model/explore.mjs';

const SEED = Number(process.env.LEASEHOLD_MODEL_SEED ?? 33);
const MS = Number(process.env.LEASEHOLD_MODEL_MS ?? 2_000);
const MAIN = fileURLToPath(new URL('./model/main.mjs', import.meta.url));

// A run that never settles fails at the timeout instead of hanging the suite.
test(`fake time: random plans keep the contract (seed ${SEED})`, { timeout: MS + 60_000 }, async () => {
  const outcome = await explore('fake', { seed: SEED, runs: 1_000_000, ms: MS });
  assert.equal(outcome.failure, undefined, outcome.failure);
  assert.ok(outcome.runs > 10, `only ${outcome.runs} runs`);
});

test(`real time, in a process of its own that exits by itself (seed ${SEED})`, async () => {
  const child = spawn(process.execPath, [MAIN, '--clock', 'real', '--seed', String(SEED), '--ms', String(MS)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let doneAt;
  child.stdout.on('data', (chunk) => {
    out += chunk;
    if (doneAt === undefined && out.includes('done:')) doneAt = performance.now();
  });
  child.stderr.on('data', (chunk) => {
    err += chunk;
  });
  // A child that never exits (a handle left behind) fails the test instead of hanging it.
  const hang = setTimeout(() => child.kill('SIGKILL'), MS + 60_000);
  const [code, signal] = await new Promise((resolve) => child.on('exit', (...exit) => resolve(exit)));
  clearTimeout(hang);
  const exitedAfter = performance.now() - doneAt;
  assert.equal(signal, null, `killed after ${MS + 60_000} ms without exiting\n${out}${err}`);
  assert.equal(code, 0, `${out}${err}`);
  assert.match(out, /done: \d+ runs/);
  // Nothing of leasehold keeps the process: it ends once the last result is in (the
  // bound only catches a timer or a handle left behind; a lease's ttl is at most 300 ms).
  assert.ok(exitedAfter < 2_000, `exited ${Math.round(exitedAfter)} ms after its last result`);
});
