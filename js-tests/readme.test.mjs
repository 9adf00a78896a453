// The README's first snippets run as pasted: each `<!-- readme-snippet: NAME -->` code
// block is written to a file in the repository (so `leasehold` resolves to this package)
// and run with `node` as a user would, against real Redis and PostgreSQL servers started
// here. Each must print what the README says and exit on its own.
// Run: node --test js-tests/readme.test.mjs
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { acquireLock } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { startRedisServer } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const scratch = path.join(root, 'js-tests', '.tmp', `readme-${process.pid}`);
const EXIT_BOUND_MS = 20_000;

/** The README's marked snippets, by name. */
function snippets() {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const found = new Map();
  for (const match of readme.matchAll(/<!-- readme-snippet: ([\w-]+) -->\n```js\n([\s\S]*?)```/g)) {
    found.set(match[1], match[2]);
  }
  return found;
}

/** Runs snippet `name` with `node`; resolves { code, stdout, stderr, ms }; fails if it does not exit in time. */
function runSnippet(name, env = {}) {
  const source = snippets().get(name);
  assert.ok(source, `README.md has no snippet marked '${name}'`);
  fs.mkdirSync(scratch, { recursive: true });
  const file = path.join(scratch, `${name}.mjs`);
  fs.writeFileSync(file, source);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd: scratch, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the README's ${name} snippet did not exit within ${EXIT_BOUND_MS} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, EXIT_BOUND_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Math.round(performance.now() - started) });
    });
  });
}

let redis;
let postgres;

before(async () => {
  [redis, postgres] = await Promise.all([startRedisServer(), startPostgres({ database: 'readme' })]);
});

after(async () => {
  fs.rmSync(scratch, { recursive: true, force: true });
  await Promise.allSettled([redis?.stop(), postgres?.stop()]);
});

test('the quick start: the two withdrawals never interleave, and it needs no server', async () => {
  const { code, stdout, stderr } = await runSnippet('quick-start');
  assert.equal(code, 0, stderr);
  assert.equal(stdout, '20\n');
});

test('the quick start has at most 10 lines of code', () => {
  const lines = snippets().get('quick-start').split('\n').filter((line) => line.trim() !== '');
  assert.ok(lines.length <= 10, `${lines.length} lines`);
});

test('Limits: ten calls, never more than three at once', async () => {
  const { code, stdout, stderr } = await runSnippet('semaphore');
  assert.equal(code, 0, stderr);
  assert.equal(stdout, 'at most 3 at once\n');
});

test('Shared reads: the readers overlap, the writer runs alone after them under a larger token', async () => {
  const { code, stdout, stderr } = await runSnippet('read-write');
  assert.equal(code, 0, stderr);
  assert.equal(stdout, "read A in, read B in, read A out, read B out, write in, write out\nthe writer's token exceeds the readers'\n");
});

test('Redis: builds the report, skips it while another instance holds the key, then exits', async () => {
  const first = await runSnippet('redis', { REDIS_URL: redis.url });
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stdout, 'built\n');

  // Another instance holds the key: the snippet skips without waiting, and still exits.
  const client = new Redis(redis.url);
  try {
    const store = new RedisLockStore({ client });
    const lease = await acquireLock(store, 'cron:nightly-report', '1m');
    assert.ok(lease, 'the test could not take the key');
    const second = await runSnippet('redis', { REDIS_URL: redis.url });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, 'another instance is building it\n');
    assert.equal(await lease.release(), true);
    await store.close();
  } finally {
    client.disconnect();
  }
});

test('PostgreSQL: creates its table, charges under the lock, then exits', async () => {
  const run = await runSnippet('postgres', { DATABASE_URL: postgres.url });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout, 'charged\n');
  // Twice: ensureSchema on an existing table is fine.
  const again = await runSnippet('postgres', { DATABASE_URL: postgres.url });
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, 'charged\n');
});

test('Leader election: one instance leads, SIGTERM steps it down, the next leads with a larger term, both exit', async () => {
  const source = snippets().get('leader-election');
  assert.ok(source, "README.md has no snippet marked 'leader-election'");
  fs.mkdirSync(scratch, { recursive: true });
  const file = path.join(scratch, 'leader-election.mjs');
  fs.writeFileSync(file, source);
  const start = () => {
    const child = spawn(process.execPath, [file], { cwd: scratch, env: { ...process.env, REDIS_URL: redis.url }, stdio: ['ignore', 'pipe', 'pipe'] });
    const run = { child, stdout: '', stderr: '' };
    child.stdout.on('data', (chunk) => (run.stdout += chunk));
    child.stderr.on('data', (chunk) => (run.stderr += chunk));
    run.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    run.until = (pattern) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${EXIT_BOUND_MS} ms:\n${run.stdout}\n${run.stderr}`)), EXIT_BOUND_MS);
        const look = () => {
          const match = pattern.exec(run.stdout);
          if (match) {
            clearTimeout(timer);
            child.stdout.off('data', look);
            resolve(match);
          }
        };
        child.stdout.on('data', look);
        look();
      });
    return run;
  };
  const first = start();
  const second = start();
  try {
    const leaderFirst = await Promise.race([first.until(/leading, term (\d+)/).then((m) => [first, second, m]), second.until(/leading, term (\d+)/).then((m) => [second, first, m])]);
    const [leading, waiting, [, term]] = leaderFirst;
    leading.child.kill('SIGTERM');
    assert.equal(await leading.exited, 0, leading.stderr);
    assert.match(leading.stdout, /stepped down\n$/);
    const [, next] = await waiting.until(/leading, term (\d+)/);
    assert.ok(Number(next) > Number(term), `term ${next} after ${term}`);
    waiting.child.kill('SIGTERM');
    assert.equal(await waiting.exited, 0, waiting.stderr);
    assert.match(waiting.stdout, /stepped down\n$/);
  } finally {
    first.child.kill('SIGKILL');
    second.child.kill('SIGKILL');
  }
});

test('OpenTelemetry: prints the metrics and spans of a held and a skipped run, then exits', async () => {
  const { code, stdout, stderr } = await runSnippet('opentelemetry');
  assert.equal(code, 0, stderr);
  const printed = /It prints:\n\n```\n([\s\S]*?)```/.exec(fs.readFileSync(path.join(root, 'README.md'), 'utf8').split('<!-- readme-snippet: opentelemetry -->')[1]);
  assert.ok(printed, 'the README shows what the snippet prints');
  assert.equal(stdout, printed[1]);
});

test('every snippet the README marks is tested here, and type-checked verbatim', () => {
  assert.deepEqual([...snippets().keys()].sort(), ['leader-election', 'opentelemetry', 'postgres', 'quick-start', 'read-write', 'redis', 'semaphore']);
  // js-tests/types/readme-NAME.mjs is what `tsc -p js-tests/types` checks (nodenext and bundler).
  for (const [name, source] of snippets()) {
    const typed = fs.readFileSync(path.join(root, 'js-tests', 'types', `readme-${name}.mjs`), 'utf8');
    assert.ok(typed.endsWith(`\n${source}`), `js-tests/types/readme-${name}.mjs differs from the README's snippet`);
  }
});
