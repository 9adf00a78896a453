// `npx leasehold`, the real binary from the packed tarball installed into an empty
// project (js-tests/matrix/pack.mjs), with the client libraries a user installs, against
// real Redis, PostgreSQL and etcd servers: --help, a table and --json from each,
// release (owner-checked; the holder loses its lease as from any release), a malformed
// URL, an unreachable server, a missing client library, and --watch for three refreshes
// under tmux with what changed highlighted, then Ctrl-C.
// Run: node --test js-tests/cli.test.mjs (needs the engines built: scripts/build.sh).

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Redis from 'ioredis';
import pg from 'pg';
import { Etcd3 } from 'etcd3';
import { RedisLockStore } from 'leasehold/redis';
import { PostgresLockStore } from 'leasehold/postgres';
import { EtcdLockStore } from 'leasehold/etcd';
import { acquireLock, withLock, LockLostError } from './support/leasehold.mjs';
import { installPacked } from './matrix/pack.mjs';
import { call, freePort, startRedisServer } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';
import { startEtcdCluster } from './support/etcd.mjs';
import { noUnhandledRejections, pollUntil } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';

noUnhandledRejections(before, after);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let project;
let redis;
let postgres;
let etcd;
const closers = [];

before(async () => {
  [redis, postgres, etcd] = await Promise.all([startRedisServer(), startPostgres(), startEtcdCluster(1)]);
  ({ project } = installPacked(root));
  // The client libraries a user installs next to leasehold (its peer dependencies).
  for (const name of ['ioredis', 'pg', 'etcd3']) {
    fs.symlinkSync(path.join(root, 'node_modules', name), path.join(project, 'node_modules', name), 'dir');
  }
});

after(async () => {
  for (const close of closers.reverse()) await close();
  await Promise.all([redis?.stop(), postgres?.stop(), etcd?.stop()]);
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

const bin = () => path.join(project, 'node_modules', '.bin', 'leasehold');

/** Runs the installed binary: { code, stdout, stderr }. */
function leasehold(args, { timeoutMs = 30_000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin(), args, { cwd: project, env: { ...process.env, NO_COLOR: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`leasehold ${args.join(' ')}: still running after ${timeoutMs} ms\n${stdout}${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function redisStore() {
  const client = new Redis({ host: '127.0.0.1', port: redis.port });
  const store = new RedisLockStore({ client });
  closers.push(async () => {
    await store.close();
    client.disconnect();
  });
  return store;
}

test('--help: the commands, the servers, what to install, examples', async () => {
  const { code, stdout } = await leasehold(['--help']);
  assert.equal(code, 0);
  for (const text of ['leasehold inspect', 'leasehold release', '--redis URL', '--postgres URL', '--etcd ENDPOINTS', 'npm install ioredis', 'Examples', '--watch']) {
    assert.ok(stdout.includes(text), `--help mentions ${text}`);
  }
  const inspect = await leasehold(['inspect', '--help']);
  assert.equal(inspect.code, 0);
  assert.match(inspect.stdout, /Reads only/);
  assert.match((await leasehold(['release', '-h'])).stdout, /--owner OWNER/);
});

describe('inspect, against each server', () => {
  test('Redis: a table and --json, with a waiter; nothing written', async () => {
    const [a, b] = [await redisStore(), await redisStore()];
    const key = uniqueKey('cli job');
    const lease = await acquireLock(a, key, 60_000);
    const waiting = withLock({ key, store: b, ttl: 60_000, wait: 60_000 }, () => 'ran');
    await pollUntil('the waiter queued', async () => (await a.inspect(key))?.waiters.length === 1, { timeoutMs: 10_000, intervalMs: 20 });
    const table = await leasehold(['inspect', '--redis', redis.url]);
    assert.equal(table.code, 0, table.stderr);
    const [header, row] = table.stdout.split('\n');
    assert.match(header, /^KEY\s+HOLDER\s+TOKEN\s+LEFT\s+WAITERS$/);
    assert.ok(row.startsWith(key) && row.includes(lease.owner) && row.includes(String(lease.fencingToken)), row);
    assert.match(row, /\s\d+\.\ds\s+1$/, 'time left in seconds, one waiter');
    const json = await leasehold(['inspect', '--redis', redis.url, '--json', key]);
    const [seen] = JSON.parse(json.stdout);
    assert.equal(seen.key, key);
    assert.equal(seen.holders[0].owner, lease.owner);
    assert.equal(seen.holders[0].fencingToken, lease.fencingToken);
    assert.ok(seen.holders[0].ttl > 0 && seen.holders[0].ttl <= 60_000);
    assert.equal(seen.waiters.length, 1);
    const detail = await leasehold(['inspect', '--redis', redis.url, key]);
    assert.match(detail.stdout, new RegExp(`\\n    1\\. ${seen.waiters[0].owner}  waiting \\d`), 'KEY named: its waiters listed');
    await lease.release();
    assert.equal(await waiting, 'ran');
    // Nothing else writes now (a queued waiter refreshes its entry): the count of writes
    // Redis keeps stays put while the binary lists and inspects a held key.
    const quiet = await acquireLock(a, key, 60_000);
    const writes = async () => Number(/rdb_changes_since_last_save:(\d+)/.exec(await call(redis.port, ['INFO', 'persistence']))[1]);
    const before = await writes();
    assert.equal((await leasehold(['inspect', '--redis', redis.url])).code, 0);
    assert.equal((await leasehold(['inspect', '--redis', redis.url, key, '--json'])).code, 0);
    assert.equal(await writes(), before, 'inspect wrote nothing');
    await quiet.release();
  });

  test('Redis: a key held with permits shows its holders, each with its weight', async () => {
    const store = await redisStore();
    const key = uniqueKey('cli permits');
    const heavy = await acquireLock(store, key, 60_000, { limit: 3, weight: 2 });
    const light = await acquireLock(store, key, 60_000, { limit: 3 });
    const table = await leasehold(['inspect', '--redis', redis.url]);
    assert.equal(table.code, 0, table.stderr);
    const row = table.stdout.split('\n').find((line) => line.startsWith(key));
    assert.ok(row?.includes(`${heavy.owner} +1 more`), row);
    const detail = await leasehold(['inspect', '--redis', redis.url, key]);
    assert.match(detail.stdout, new RegExp(`holds: ${heavy.owner}  token ${heavy.fencingToken}  [\\d.]+s left  weight 2 of 3`));
    assert.match(detail.stdout, new RegExp(`holds: ${light.owner}  token ${light.fencingToken}  [\\d.]+s left  weight 1 of 3`));
    const released = await leasehold(['release', '--redis', redis.url, key, '--owner', light.owner]);
    assert.equal(released.code, 0, released.stderr);
    assert.match(released.stdout, new RegExp(`token ${light.fencingToken}`), 'the lease released is the owner\'s own');
    assert.equal(await heavy.release(), true);
  });

  test('PostgreSQL: a table and --json', async () => {
    const pool = new pg.Pool({ ...postgres.connectionOptions, max: 2 });
    pool.on('error', () => {});
    const store = new PostgresLockStore({ client: pool });
    closers.push(async () => {
      await store.close();
      await pool.end();
    });
    await store.ensureSchema();
    const key = uniqueKey('cli pg');
    const lease = await acquireLock(store, key, 60_000);
    const table = await leasehold(['inspect', '--postgres', postgres.url]);
    assert.equal(table.code, 0, table.stderr);
    assert.ok(table.stdout.split('\n')[1].includes(lease.owner));
    const [seen] = JSON.parse((await leasehold(['inspect', '--postgres', postgres.url, '--json', '--keys', key])).stdout);
    assert.deepEqual(
      { key: seen.key, owner: seen.holders[0].owner, token: seen.holders[0].fencingToken, waiters: seen.waiters },
      { key, owner: lease.owner, token: lease.fencingToken, waiters: [] },
    );
    const missing = await leasehold(['inspect', '--postgres', postgres.url, '--table', 'no_such_table']);
    assert.equal(missing.code, 3);
    assert.match(missing.stderr, /no_such_table/);
    await lease.release();
  });

  test('etcd: a table and --json', async () => {
    const client = new Etcd3({ hosts: etcd.endpoints });
    const store = new EtcdLockStore({ client });
    closers.push(async () => {
      await store.close();
      client.close();
    });
    const key = uniqueKey('cli/etcd');
    const lease = await acquireLock(store, key, 60_000);
    const table = await leasehold(['inspect', '--etcd', etcd.endpoints.join(',')]);
    assert.equal(table.code, 0, table.stderr);
    assert.ok(table.stdout.split('\n')[1].startsWith(key));
    const [seen] = JSON.parse((await leasehold(['inspect', '--etcd', etcd.endpoints[0], '--json'])).stdout);
    assert.equal(seen.holders[0].owner, lease.owner);
    assert.equal(seen.holders[0].fencingToken, lease.fencingToken);
    await lease.release();
  });
});

describe('release', () => {
  test('owner-checked; the holder loses its lease as from any release; the waiter goes next', async () => {
    const [a, b] = [await redisStore(), await redisStore()];
    const key = uniqueKey('cli release');
    // The holder's work stops when its signal says the lease is lost.
    const holding = withLock({ key, store: a, ttl: 1_500 }, (ctx) => new Promise((_, reject) => {
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
    }));
    // Its loss may come while the release command is still exiting: handled from now on.
    const held = holding.then(() => undefined, (error) => error);
    await pollUntil('the holder', async () => (await a.inspect(key))?.holders.length === 1, { timeoutMs: 10_000, intervalMs: 20 });
    const waiting = withLock({ key, store: b, ttl: 10_000, wait: 30_000 }, () => 'ran');
    await pollUntil('the waiter', async () => (await a.inspect(key))?.waiters.length === 1, { timeoutMs: 10_000, intervalMs: 20 });
    const { holders: [holder] } = await a.inspect(key);
    const wrong = await leasehold(['release', '--redis', redis.url, key, '--owner', 'someone-else']);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stdout, new RegExp(`nothing released: it is held by ${holder.owner}, not someone-else`));
    assert.equal((await a.inspect(key)).holders[0].owner, holder.owner, 'left alone');
    const done = await leasehold(['release', '--redis', redis.url, key, '--owner', holder.owner]);
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, new RegExp(`^released ${key}: the lease of ${holder.owner} \\(token ${holder.fencingToken}`));
    assert.ok((await held) instanceof LockLostError, 'the holder learned it at its next renewal');
    assert.equal(await waiting, 'ran');
    const json = JSON.parse((await leasehold(['release', '--redis', redis.url, key, '--owner', holder.owner, '--json'])).stdout);
    assert.deepEqual(json, { key, owner: holder.owner, released: false, before: null });
  });
});

describe('mistakes and failures', () => {
  test('a malformed URL or command line: exit 2, saying what was wrong', async () => {
    for (const [args, message] of [
      [['inspect', '--redis', 'localhost:6379'], /--redis expects a URL like redis:\/\/127\.0\.0\.1:6379/],
      [['inspect', '--postgres', 'mysql://x'], /--postgres expects a URL/],
      [['inspect', '--etcd', 'nope'], /--etcd expects endpoints/],
      [['inspect'], /name the server/],
      [['inspect', '--redis', redis.url, '--limit', '0'], /--limit must be a positive whole number/],
      [['release', '--redis', redis.url, 'k'], /release needs --owner/],
      [['frobnicate'], /unknown command 'frobnicate'/],
    ]) {
      const { code, stderr, stdout } = await leasehold(args);
      assert.equal(code, 2, args.join(' '));
      assert.match(stderr, message);
      assert.match(stderr, /leasehold --help/);
      assert.equal(stdout, '');
    }
  });

  test('an unreachable server: exit 3, naming it', async () => {
    const port = await freePort();
    for (const [args, message] of [
      [['inspect', '--redis', `redis://127.0.0.1:${port}`], /cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+.*ECONNREFUSED/],
      [['inspect', '--postgres', `postgres://u:secret@127.0.0.1:${port}/db`], /cannot reach PostgreSQL at postgres:\/\/u:\*\*\*@127\.0\.0\.1/],
      [['inspect', '--etcd', `http://127.0.0.1:${port}`], /cannot reach etcd at http:\/\/127\.0\.0\.1:\d+/],
    ]) {
      const started = Date.now();
      const { code, stderr } = await leasehold(args);
      assert.equal(code, 3, `${args.join(' ')}: ${stderr}`);
      assert.match(stderr, message);
      assert.ok(!stderr.includes('secret'), 'no password shown');
      assert.ok(Date.now() - started < 15_000, 'bounded');
    }
  });

  test('a client library not installed: what to install', async () => {
    const installed = path.join(project, 'node_modules', 'pg');
    fs.renameSync(installed, `${installed}.aside`);
    try {
      const { code, stderr } = await leasehold(['inspect', '--postgres', postgres.url]);
      assert.equal(code, 3);
      assert.match(stderr, /--postgres needs the pg package, which is not installed here: npm install pg/);
    } finally {
      fs.renameSync(`${installed}.aside`, installed);
    }
  });
});

const hasTmux = spawnSync('tmux', ['-V']).status === 0;

test('--watch under tmux: three refreshes, changes highlighted, Ctrl-C quits', { skip: !hasTmux && 'tmux is not installed (scripts/setup.sh installs it)' }, async () => {
  const store = await redisStore();
  const prefix = uniqueKey('watch');
  const first = await acquireLock(store, `${prefix}/a`, 60_000);
  const session = `leasehold-cli-${process.pid}`;
  const tmux = (...args) => spawnSync('tmux', args, { encoding: 'utf8' });
  const command = `${bin()} inspect --redis ${redis.url} --keys ${prefix}/ --watch; echo "exit=$?"; sleep 30`;
  assert.equal(tmux('new-session', '-d', '-s', session, '-x', '160', '-y', '40', '-c', project, command).status, 0);
  closers.push(async () => tmux('kill-session', '-t', session));
  const screen = () => tmux('capture-pane', '-p', '-e', '-t', session).stdout;
  const plain = () => screen().replace(/\x1b\[[0-9;]*m/g, '');
  await pollUntil('the first frame', () => /refresh 1 /.test(plain()) && plain().includes(first.owner), { timeoutMs: 15_000, intervalMs: 50 });
  const second = await acquireLock(store, `${prefix}/b`, 60_000);
  await pollUntil('a frame with the new key', () => plain().includes(second.owner), { timeoutMs: 10_000, intervalMs: 50 });
  const lines = screen().split('\n');
  const added = lines.find((l) => l.includes(`${prefix}/b`));
  assert.match(added, /\x1b\[[0-9;]*32m/, `the new key is highlighted: ${JSON.stringify(added)}`);
  const kept = lines.find((l) => l.includes(`${prefix}/a`));
  assert.doesNotMatch(kept, /\x1b\[[0-9;]*3[123]m/, 'an unchanged key is not');
  await second.release();
  await pollUntil('a third refresh showing the release', () => /refresh [3-9] /.test(plain()) && /\(released\)/.test(plain()), { timeoutMs: 10_000, intervalMs: 50 });
  tmux('send-keys', '-t', session, 'C-c');
  await pollUntil('the command to exit', () => /exit=0/.test(plain()), { timeoutMs: 10_000, intervalMs: 50 });
  await first.release();
});
