// The engine's one host timer, on the real clock: it never keeps a process alive on its
// own (only for something a caller waits for), and it is never trusted to fire (global
// fake timers that swallow it stall nothing). Runs once per engine.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import FakeTimers from '@sinonjs/fake-timers';
import { MemoryLockStore, acquireLock, engine } from './support/leasehold.mjs';
import { noUnhandledRejections, within } from './support/async.mjs';

noUnhandledRejections(before, after);

const entry = new URL('./support/leasehold.mjs', import.meta.url).href;
// How long a process may take to exit after its last observable work, on a loaded
// 2-core machine: Node itself exits within tens of milliseconds.
const EXIT_BOUND_MS = 3_000;
// How long a process is given at all before it is killed and the test fails.
const KILL_AFTER_MS = 15_000;

/**
 * Runs `body` (module code with the package's exports in scope) in a process of its own
 * on this engine; resolves to each line it printed with the time it came, and the time
 * it exited (undefined when it had to be killed).
 */
function runProcess(body) {
  const script = `const { MemoryLockStore, acquireLock, ResiliencePipelineBuilder, engine } = await import(${JSON.stringify(entry)});
const say = (line) => console.log(line);
${body}`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, LEASEHOLD_ENGINE: engine },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = [];
    let stderr = '';
    let buffered = '';
    child.stdout.on('data', (chunk) => {
      buffered += chunk;
      for (let at = buffered.indexOf('\n'); at >= 0; at = buffered.indexOf('\n')) {
        lines.push({ line: buffered.slice(0, at), at: performance.now() });
        buffered = buffered.slice(at + 1);
      }
    });
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const killer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(killer);
      const exitedAt = signal === 'SIGKILL' ? undefined : performance.now();
      resolve({ lines, exitedAt, code, stderr });
    });
  });
}

/** Asserts that the process printed `last` as its last line and exited within the bound after it. */
function exitedSoonAfter(run, last) {
  assert.equal(run.stderr, '', 'nothing on stderr');
  const printed = run.lines.map((l) => l.line);
  assert.equal(printed.at(-1), last, `printed ${JSON.stringify(printed)}`);
  assert.ok(run.exitedAt !== undefined, `the process was still alive ${KILL_AFTER_MS} ms after it started: killed`);
  assert.equal(run.code, 0);
  const after = run.exitedAt - run.lines.at(-1).at;
  assert.ok(after < EXIT_BOUND_MS, `exited ${after.toFixed(0)} ms after its last work`);
  return after;
}

describe(`the process exits when nothing observable is left (${engine})`, () => {
  test("an acquireLock lease on the memory store never released, ttl '1h'", async () => {
    const run = await runProcess(`
const lease = await acquireLock(new MemoryLockStore(), 'job', '1h');
say(lease ? 'held' : 'not held');`);
    exitedSoonAfter(run, 'held');
  });

  test('an auto-renewed acquireLock lease on the memory store, never released', async () => {
    const run = await runProcess(`
const lease = await acquireLock(new MemoryLockStore(), 'job', '300ms', { autoRenew: true });
say(lease ? 'held' : 'not held');`);
    exitedSoonAfter(run, 'held');
  });

  test('a callback on the memory store that never settles (its lease renews every 100 ms)', async () => {
    const run = await runProcess(`
const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'job', ttl: '300ms' }).build();
pipeline.execute(() => { say('running'); return new Promise(() => {}); });`);
    exitedSoonAfter(run, 'running');
  });

  test('a waiter with a deadline keeps the process alive until that deadline, then it exits', async () => {
    const run = await runProcess(`
const store = new MemoryLockStore();
await acquireLock(store, 'job', '1h');
const started = performance.now();
const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'job', store, wait: 1500 }).build();
say('waiting');
await pipeline.execute(() => 'ran').then(
  (value) => say(value),
  (error) => say(error.code + ' after ' + Math.round(performance.now() - started)),
);`);
    const printed = run.lines.map((l) => l.line);
    const answer = printed.at(-1) ?? '';
    assert.match(answer, /^LOCK_NOT_ACQUIRED after \d+$/, `printed ${JSON.stringify(printed)}`);
    assert.ok(Number(answer.split(' ').at(-1)) >= 1_500, `answered at the deadline: ${answer}`);
    exitedSoonAfter(run, answer);
  });

  test("a JS store's lease keeps its renewals, and the process, alive while the callback runs", async () => {
    // The in-process store holds no handle of its own: only the engine's renewal timer can
    // keep the process alive until the (unref'd) check at 1 s.
    const run = await runProcess(`
let token = 0;
let renewals = 0;
const store = {
  acquire: async () => ({ fencingToken: ++token }),
  renew: async () => (renewals++, true),
  release: async () => true,
};
const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'job', ttl: '300ms', store }).build();
pipeline.execute(() => { say('running'); return new Promise(() => {}); });
setTimeout(() => { say(renewals >= 2 ? 'alive and renewing' : 'renewals: ' + renewals); process.exit(0); }, 1000).unref();`);
    exitedSoonAfter(run, 'alive and renewing');
  });
});

describe(`a host timer that never fires (${engine})`, () => {
  for (const [name, toFake] of [
    ['every fake the default install makes (the clock, performance.now and Date too)', undefined],
    ['fake setTimeout and clearTimeout only', ['setTimeout', 'clearTimeout']],
  ]) {
    test(`global fake timers around a held lease, then removed: a waiter is answered on the real clock (${name})`, async () => {
      const store = new MemoryLockStore();
      const key = `swallowed:${name}`;
      // The lease's expiry timer goes to the fake setTimeout, which never fires it.
      const clock = FakeTimers.install(toFake ? { toFake } : {});
      let held;
      try {
        held = await acquireLock(store, key, 300);
      } finally {
        clock.uninstall();
      }
      assert.ok(held, 'the lease was taken');
      const started = performance.now();
      const lease = await within(5_000, "a waiter with wait: '1s'", acquireLock(store, key, 300, { wait: '1s' }));
      assert.ok(lease, 'the waiter got the lease when the first one lapsed');
      assert.ok(lease.fencingToken > held.fencingToken);
      assert.ok(performance.now() - started < 1_500, 'answered by its deadline');
      assert.equal(await held.release(), false, 'the first lease lapsed');
      assert.equal(await lease.release(), true);
    });
  }
});
