// The stores' own connections follow the user's client: a script that used a
// RedisLockStore or a PostgresLockStore, made an execution wait (so the store opened
// its listening connection), and closed its client, exits on its own, with or without
// the store's close(). Real processes (support/exit-child.mjs, importing the package by
// name) on real servers: ioredis and node-redis, standalone and a 3-master cluster;
// PostgreSQL with a Pool, and with a Client plus a listenClient. And a waiter whose
// store's client is closed fails with a LockStoreError instead of waiting on.
// Run: node --test js-tests/store-exit.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { acquireLock, engine, LockStoreError } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { PostgresLockStore } from 'leasehold/postgres';
import pg from 'pg';
import { once } from 'node:events';
import { call, startRedisCluster, startRedisServer, waitFor } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';
import { noUnhandledRejections, within } from './support/async.mjs';
import {
  connectIoredis,
  connectIoredisCluster,
  connectNodeRedis,
  connectNodeRedisCluster,
} from './support/redis-clients.mjs';
import { onLines } from './support/lines.mjs';
import { uniqueKey } from './support/keys.mjs';

noUnhandledRejections(before, after);

const CHILD = fileURLToPath(new URL('./support/exit-child.mjs', import.meta.url));
// How long a child may take to exit after its last statement: generous, for a loaded
// 2-core machine (an exit held by an open connection never comes at all).
const EXIT_BOUND_MS = 8000;

let redis;
let cluster;
let postgres;

before(async () => {
  [redis, cluster, postgres] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 }), startPostgres()]);
});

after(async () => {
  await Promise.allSettled([redis?.stop(), cluster?.stop(), postgres?.stop()]);
});

/**
 * Runs the child for `setup` and `mode`; resolves to { lines, exitAfterMs } once it has
 * exited, or rejects when it does not exit within EXIT_BOUND_MS of its last statement
 * (it is killed then) or fails.
 */
function runChild(setup, mode, target) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, setup, mode, target], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    const lines = [];
    let stderr = '';
    let doneAt;
    let timer;
    const arm = (ms, why) => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${setup} (${mode}): ${why}\nstdout: ${JSON.stringify(lines)}\nstderr: ${stderr}`));
      }, ms);
    };
    arm(30_000, 'did not finish its work within 30 s');
    onLines(child.stdout, (line) => {
      const message = JSON.parse(line);
      lines.push(message);
      if (message.done) {
        doneAt = performance.now();
        arm(EXIT_BOUND_MS, `did not exit within ${EXIT_BOUND_MS} ms of its last statement`);
      }
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') return; // rejected by the timer
      if (code !== 0 || doneAt === undefined) {
        reject(new Error(`${setup} (${mode}) exited with ${code ?? signal} before its last statement:\n${stderr}`));
        return;
      }
      resolve({ lines, exitAfterMs: performance.now() - doneAt });
    });
  });
}

const SETUPS = [
  { name: 'ioredis', target: () => JSON.stringify([{ host: '127.0.0.1', port: redis.port }]) },
  { name: 'node-redis', target: () => JSON.stringify([{ host: '127.0.0.1', port: redis.port }]) },
  { name: 'ioredis-cluster', target: () => JSON.stringify(cluster.nodes) },
  { name: 'node-redis-cluster', target: () => JSON.stringify(cluster.nodes) },
  { name: 'pg-pool', target: () => postgres.url },
  { name: 'pg-client', target: () => postgres.url },
];

describe(`a script exits once it closed its client (${engine})`, () => {
  for (const setup of SETUPS) {
    for (const mode of ['no-close', 'close']) {
      test(`${setup.name}, ${mode === 'close' ? 'store.close() then the client' : 'the client only, no store.close()'}`, async (t) => {
        const { lines, exitAfterMs } = await runChild(setup.name, mode, setup.target());
        t.diagnostic(`exited ${Math.round(exitAfterMs)} ms after its last statement`);
        assert.equal(lines[0].engine, engine, 'the child ran on the engine under test');
        assert.ok(exitAfterMs < EXIT_BOUND_MS, `exited ${Math.round(exitAfterMs)} ms after its last statement`);
      });
    }
  }
});

/** A Redis store on `client`, closed by `quit`. */
const onRedis = (client, quit) => ({ store: new RedisLockStore({ client, prefix: 'exit-waiter' }), quit: () => quit(client) });

/** A PostgreSQL store on a Pool, or on a Client (+ a listenClient), closed by ending them. */
async function onPostgres(kind) {
  if (kind === 'pool') {
    const pool = new pg.Pool({ connectionString: postgres.url });
    const store = new PostgresLockStore({ client: pool, table: 'exit_waiter_locks' });
    await store.ensureSchema();
    return { store, quit: () => pool.end() };
  }
  const clients = [new pg.Client({ connectionString: postgres.url })];
  if (kind === 'client+listen') clients.push(new pg.Client({ connectionString: postgres.url }));
  await Promise.all(clients.map((c) => c.connect()));
  const store = new PostgresLockStore({ client: clients[0], listenClient: clients[1], table: 'exit_waiter_locks' });
  await store.ensureSchema();
  return { store, quit: () => Promise.all(clients.map((c) => c.end())) };
}

// A client left open but unref'd by its owner: the store's subscriber connection, idle
// once nobody waits, must not hold the process either.
test('node-redis, the client left open but unref\'d, no store.close()', async (t) => {
  const { exitAfterMs } = await runChild('node-redis', 'unref', JSON.stringify([{ host: '127.0.0.1', port: redis.port }]));
  t.diagnostic(`exited ${Math.round(exitAfterMs)} ms after its last statement`);
  assert.ok(exitAfterMs < EXIT_BOUND_MS);
});

/**
 * A waiter on a store whose client its owner closes while it waits: it must fail with a
 * LockStoreError (the client's error as cause) promptly, never wait on.
 */
const WAITER_SETUPS = [
  { name: 'ioredis', open: async () => onRedis(await connectIoredis(redis.port), (c) => c.quit()) },
  { name: 'node-redis', open: async () => onRedis(await connectNodeRedis(redis.port), (c) => c.quit()) },
  { name: 'ioredis Cluster', open: async () => onRedis(await connectIoredisCluster(cluster.nodes), (c) => c.quit()) },
  { name: 'node-redis cluster', open: async () => onRedis(await connectNodeRedisCluster(cluster.nodes), (c) => c.close()) },
  { name: 'pg Pool', open: () => onPostgres('pool') },
  { name: 'pg Client + listenClient', open: () => onPostgres('client+listen') },
  { name: 'pg Client alone (polled)', open: () => onPostgres('client') },
];

describe('a waiter whose store client is closed fails with a LockStoreError', () => {
  for (const setup of WAITER_SETUPS) {
    test(setup.name, async () => {
      const { store, quit } = await setup.open();
      const key = uniqueKey('closed-under-waiter');
      const holder = await acquireLock(store, key, '3s');
      assert.ok(holder);
      const waiting = acquireLock(store, key, '3s', { wait: '30s' });
      waiting.catch(() => {});
      // The waiter found the key held and listens (or polls).
      await new Promise((resolve) => setTimeout(resolve, 300));
      await quit();
      const error = await within(5000, 'the waiter to fail', waiting.then(() => undefined, (e) => e));
      assert.ok(error instanceof LockStoreError, `a LockStoreError, got ${error}`);
      assert.equal(error.method, 'acquire');
      assert.ok(error.cause instanceof Error, 'the client error is the cause');
      await holder.release().catch(() => {});
      await store.close();
    });
  }
});

// A node-redis cluster client goes on opening its nodes' connections after it is closed
// while it connects: a store closed while its subscriber connection connects must close
// those too (left open, they reconnect forever once the servers go, holding the process).
test("node-redis cluster: a client closed while the store's subscriber connects leaves no connection behind", async () => {
  const connections = async () => {
    let n = 0;
    for (const { port } of cluster.nodes) n += (await call(port, ['CLIENT', 'LIST'])).split('\n').filter(Boolean).length;
    return n;
  };
  const before = await connections();
  // A waiter opens the store's subscriber connection; its client is closed soon after,
  // at different moments of that connection's connect().
  for (const pauseMs of [0, 1, 2, 5, 10, 20, 40]) {
    const client = await connectNodeRedisCluster(cluster.nodes);
    const store = new RedisLockStore({ client, prefix: 'exit-connecting' });
    const key = uniqueKey('connecting');
    const holder = await acquireLock(store, key, '3s');
    const waiting = acquireLock(store, key, '3s', { wait: '30s' });
    waiting.catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    await client.close();
    await assert.rejects(within(5000, 'the waiter to fail', waiting), LockStoreError);
    await holder.release().catch(() => {});
    await store.close();
  }
  await waitFor('no connection of the stores left', async () => (await connections()) <= before, { timeoutMs: 5000 });
});

// A client closed and then connected again by its owner: the store's subscriber (seen
// by its grant channel on the server) goes with the client, a new one is opened at the
// next wait, and goes with the client's next close in turn.
describe('a Redis client closed and connected again', () => {
  const KINDS = [
    {
      name: 'ioredis',
      connect: () => connectIoredis(redis.port),
      // quit() resolves with the server's OK, before the connection is closed.
      quit: (c) => Promise.all([once(c, 'end'), c.quit()]),
      reopen: (c) => c.connect(),
    },
    { name: 'node-redis', connect: () => connectNodeRedis(redis.port), quit: (c) => c.quit(), reopen: (c) => c.connect() },
  ];
  for (const kind of KINDS) {
    test(`${kind.name}: waiters are woken through a new subscriber connection`, async () => {
      const client = await kind.connect();
      const store = new RedisLockStore({ client, prefix: 'exit-reopen' });
      const grantChannels = async () => (await call(redis.port, ['PUBSUB', 'CHANNELS', 'exit-reopen:grants:*'])).length;
      const wakes = async (key) => {
        const holder = await acquireLock(store, key, '5s');
        const waiting = acquireLock(store, key, '5s', { wait: '10s' });
        await waitFor('the waiter to listen for grants', async () => (await grantChannels()) === 1, { timeoutMs: 5000 });
        assert.equal(await holder.release(), true);
        const lease = await within(5000, 'the waiter gets the key', waiting);
        assert.ok(lease);
        await lease.release();
      };
      await wakes(uniqueKey('before'));
      await kind.quit(client);
      await waitFor('the subscriber to close with the client', async () => (await grantChannels()) === 0, { timeoutMs: 5000 });
      await kind.reopen(client);
      await wakes(uniqueKey('after'));
      await kind.quit(client);
      await waitFor('the new subscriber to close with the client', async () => (await grantChannels()) === 0, { timeoutMs: 5000 });
    });
  }
});
