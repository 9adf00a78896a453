// Every example in examples/ run as its users would run it (a child process, settings
// from the environment), against real servers started here: Redis for cron-fleet,
// PostgreSQL for fenced-write, etcd for etcd-deploy, and for browser-tab a headless Chromium on the page
// served by the example's own server. Assertions are on what the examples print.
// Run: node --test js-tests/examples.test.mjs

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';
import { startEtcdCluster } from './support/etcd.mjs';
import { chromiumMissing, launchChromium } from './support/chromium.mjs';

const examples = fileURLToPath(new URL('../examples/', import.meta.url));

/** Runs `node <file>` with `env`; resolves { code, stdout, stderr }; killed after `timeoutMs`. */
function runNode(file, { env = {}, timeoutMs = 20_000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [].concat(file), {
      cwd: examples,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} did not finish in ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let redis;
let postgres;
let etcd;

before(async () => {
  [redis, postgres, etcd] = await Promise.all([startRedisServer(), startPostgres({ database: 'examples' }), startEtcdCluster(1)]);
});

after(async () => {
  await Promise.allSettled([redis?.stop(), postgres?.stop(), etcd?.stop()]);
});

test('cron-fleet: of 5 instances started at once, exactly one runs the nightly job', async (t) => {
  const started = performance.now();
  const { code, stdout, stderr } = await runNode('cron-fleet/fleet.mjs', {
    env: { REDIS_URL: redis.url, FLEET_SIZE: '5' },
  });
  t.diagnostic(`${Math.round(performance.now() - started)} ms\n${stdout}`);
  assert.equal(code, 0, stderr);
  const lines = stdout.trim().split('\n');
  const ran = lines.filter((l) => / ran nightly-report:/.test(l));
  const skipped = lines.filter((l) => / skipped nightly-report:/.test(l));
  assert.equal(ran.length, 1, stdout);
  assert.equal(skipped.length, 4, stdout);
  assert.match(stdout, /^1 of 5 instances ran the job$/m);

  // The same day again: everyone skips (the first to look finds the job done; another
  // may find the lock held while that one looks).
  const again = await runNode('cron-fleet/fleet.mjs', { env: { REDIS_URL: redis.url, FLEET_SIZE: '2', JOB_MS: '50' } });
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /^0 of 2 instances ran the job$/m);
  assert.ok(/already done today/.test(again.stdout), again.stdout);
  assert.equal((again.stdout.match(/: skipped nightly-report:/g) ?? []).length, 2, again.stdout);
});

test("fenced-write: the stale holder's write is rejected by the database, the newer one stands", async (t) => {
  const { code, stdout, stderr } = await runNode('fenced-write/fenced-write.mjs', { env: { DATABASE_URL: postgres.url } });
  t.diagnostic(stdout);
  assert.equal(code, 0, stderr);
  const tokenA = Number(stdout.match(/A: holds account:42 with token (\d+)/)?.[1]);
  const tokenB = Number(stdout.match(/B: got account:42 with token (\d+)/)?.[1]);
  assert.ok(tokenB > tokenA, `B's token ${tokenB} > A's ${tokenA}`);
  assert.match(stdout, /B: write accepted/);
  assert.match(stdout, new RegExp(`A: write REJECTED: token ${tokenA} is stale`));
  assert.match(stdout, /A: release: nothing to release, the lease had lapsed/);
  assert.match(stdout, /db: final balance 150 /);
  // In that order: B wrote before A came back.
  assert.ok(stdout.indexOf('B: write accepted') < stdout.indexOf('A: write REJECTED'));
});

test("custom-store: a Map store through a pipeline; one holder at a time, tokens increasing", async (t) => {
  const { code, stdout, stderr } = await runNode('custom-store/main.mjs');
  t.diagnostic(stdout);
  assert.equal(code, 0, stderr);
  const holds = [...stdout.matchAll(/task \d: holds 'report' with token (\d+) \(holders now: (\d+)\)/g)];
  assert.equal(holds.length, 3, stdout);
  const tokens = holds.map((m) => Number(m[1]));
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens ${tokens.join(', ')}`);
  assert.deepEqual(holds.map((m) => m[2]), ['1', '1', '1']);
  assert.match(stdout, /fail-fast: LOCK_NOT_ACQUIRED, the key is held/);
  assert.match(stdout, /\(increasing\)/);
  assert.match(stdout, /after the last release: locked = false/);
  const [, most, exportTokens] = stdout.match(/exports: 4 ran with limit 2, at most (\d+) at once, tokens ([\d, ]+)/) ?? [];
  assert.equal(most, '2', stdout);
  assert.equal(new Set(exportTokens.split(', ')).size, 4, stdout);
});

test('custom-store: the Map store passes the store kit (leasehold/testing)', async (t) => {
  // A run of its own (spawn leaves out an undefined variable), not a subtest of this one.
  const env = { NODE_TEST_CONTEXT: undefined };
  const { code, stdout, stderr } = await runNode(['--test', '--test-reporter=tap', 'custom-store/map-store.test.mjs'], { env });
  t.diagnostic(stdout.split('\n').filter((line) => /^# (pass|fail|skipped) /.test(line)).join('; '));
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  assert.match(stdout, /^# pass 21$/m);
  assert.match(stdout, /^# fail 0$/m);
});

test('etcd-deploy: 4 deployers at once take turns; every fenced log write accepted, in token order', async (t) => {
  const { code, stdout, stderr } = await runNode('etcd-deploy/fleet.mjs', {
    env: { ETCD_ENDPOINTS: etcd.endpoints.join(','), FLEET_SIZE: '4' },
  });
  t.diagnostic(stdout);
  assert.equal(code, 0, stderr);
  const lines = stdout.trim().split('\n');
  // One deploy at a time: each "deploying" line is followed by its own "done" line.
  const steps = lines.filter((l) => /: (deploying|done)/.test(l));
  assert.equal(steps.length, 8, stdout);
  for (let i = 0; i < steps.length; i += 2) {
    const who = steps[i].match(/^(deployer-\d): deploying with fencing token \d+$/)?.[1];
    assert.ok(who, steps[i]);
    assert.equal(steps[i + 1], `${who}: done, log write accepted`);
  }
  const tokens = [...stdout.matchAll(/deploying with fencing token (\d+)/g)].map((m) => Number(m[1]));
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens ${tokens.join(', ')}`);
  const logged = [...stdout.matchAll(/^  (\d+): (deployer-\d) deployed$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(logged, tokens);
  assert.match(stdout, /^4 of 4 deploys recorded$/m);
});

// ---------------------------------------------------------------------------------
// browser-tab: Debian's chromium, headless, driven by playwright-core
// ---------------------------------------------------------------------------------

const browserMissing = chromiumMissing
  ? chromiumMissing
  : !existsSync(fileURLToPath(new URL('../lib/entries/browser.mjs', import.meta.url)))
      ? 'lib/entries/browser.mjs (the browser entry) is not there'
      : false;

/** Starts examples/browser-tab/serve.mjs on a free port; resolves { url, stop }. */
function startExampleServer() {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['browser-tab/serve.mjs'], {
      cwd: examples,
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve.mjs printed no URL:\n${out}`));
    }, 10_000);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const url = out.match(/serving (http:\/\/\S+)/)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve({ url, stop: () => child.kill('SIGTERM') });
      }
    });
    child.stderr.on('data', (chunk) => {
      out += chunk;
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serve.mjs exited (${code}):\n${out}`));
    });
  });
}

test('browser-tab: two quick clicks in headless Chromium; the saves never overlap', { skip: browserMissing }, async (t) => {
  const server = await startExampleServer();
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const problems = [];
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
    });
    await page.goto(server.url);
    await page.waitForFunction(() => window.leaseholdDemo?.ready === true, null, { timeout: 15_000 });
    // Two clicks in the same instant: the second save must wait for the first.
    await page.evaluate(() => {
      const button = document.getElementById('save');
      button.click();
      button.click();
    });
    await page.waitForFunction(() => window.leaseholdDemo.saves.length === 2, null, { timeout: 10_000 });
    const demo = await page.evaluate(() => window.leaseholdDemo);
    const log = await page.textContent('#log');
    t.diagnostic(`engine ${demo.engine}; saves ${JSON.stringify(demo.saves)}\n${log}`);
    assert.deepEqual(problems, []);
    assert.equal(demo.engine, 'wasm');
    assert.equal(demo.clicks, 2);
    assert.equal(demo.maxInside, 1, 'never two saves at once');
    const [first, second] = demo.saves;
    assert.deepEqual([first.click, second.click], [1, 2], 'in click order');
    assert.ok(second.start >= first.end, `the second save started (${second.start}) after the first ended (${first.end})`);
    assert.ok(Number.isSafeInteger(first.token) && second.token > first.token, `tokens ${first.token} < ${second.token}`);
    assert.match(log, /click 1: saving with fencing token \d+\n(.*\n)*click 1: saved\n(.*\n)*click 2: saving/);
  } finally {
    await browser.close();
    server.stop();
  }
});
