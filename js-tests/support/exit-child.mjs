// A user's script in a process of its own, for js-tests/store-exit.test.mjs: it takes a
// lock through the real engine (the package imported by name), makes a second
// execution WAIT for it (so that the store opens its listening connection), releases
// both, then closes its client the way the user would, with or without the store's
// close() first, and returns from its top level. The test asserts that the process
// then exits on its own.
//
//   node exit-child.mjs <setup> <close|no-close|unref> <target>
//
// `unref` (node-redis only): instead of closing its client, the script unrefs it (the
// client stays open): the store's own connection must not hold the process either.
// <setup>: ioredis | node-redis | ioredis-cluster | node-redis-cluster (target: a JSON
// array of { host, port }), pg-pool | pg-client (target: a connection url; pg-client
// is a Client plus a listenClient of the user's). Lines on stdout, one JSON object each:
// {"waited":<ms>,"engine"} once the waiter got the lock, then {"done":true} as the
// script's last statement.

import Redis from 'ioredis';
import { createClient, createCluster } from 'redis';
import pg from 'pg';
import { acquireLock, engine } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { PostgresLockStore } from 'leasehold/postgres';

const [setup, mode, target] = process.argv.slice(2);
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The user's client(s), the store on them, and how the user closes them. */
async function open() {
  if (setup === 'ioredis') {
    const [node] = JSON.parse(target);
    const client = new Redis(node);
    return { store: new RedisLockStore({ client }), quit: () => client.quit() };
  }
  if (setup === 'node-redis') {
    const [node] = JSON.parse(target);
    const client = await createClient({ socket: node }).connect();
    return { store: new RedisLockStore({ client }), quit: () => client.quit(), unref: () => client.unref() };
  }
  if (setup === 'ioredis-cluster') {
    const client = new Redis.Cluster(JSON.parse(target));
    return { store: new RedisLockStore({ client }), quit: () => client.quit() };
  }
  if (setup === 'node-redis-cluster') {
    const client = await createCluster({ rootNodes: JSON.parse(target).map((socket) => ({ socket })) }).connect();
    return { store: new RedisLockStore({ client }), quit: () => client.close() };
  }
  if (setup === 'pg-pool') {
    const pool = new pg.Pool({ connectionString: target });
    const store = new PostgresLockStore({ client: pool, table: 'exit_locks' });
    await store.ensureSchema();
    return { store, quit: () => pool.end() };
  }
  if (setup === 'pg-client') {
    const client = new pg.Client({ connectionString: target });
    const listenClient = new pg.Client({ connectionString: target });
    await Promise.all([client.connect(), listenClient.connect()]);
    const store = new PostgresLockStore({ client, listenClient, table: 'exit_locks' });
    await store.ensureSchema();
    return { store, quit: () => Promise.all([client.end(), listenClient.end()]) };
  }
  throw new Error(`unknown setup ${setup}`);
}

const { store, quit, unref } = await open();
const key = `exit-${setup}-${process.pid}`;
const holder = await acquireLock(store, key, '10s');
if (!holder) throw new Error('the key was not free');
const started = performance.now();
const waiting = acquireLock(store, key, '10s', { wait: '10s' });
await sleep(200); // the waiter found the key held and listens for its release
await holder.release();
const lease = await waiting;
if (!lease) throw new Error('the waiter did not get the key');
say({ waited: Math.round(performance.now() - started), engine });
await lease.release();
if (mode === 'close') await store.close();
if (mode === 'unref') unref();
else await quit();
say({ done: true });
