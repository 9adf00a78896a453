// A waiter that gives up leaves the Redis queue (issue: ghost waiters). A waiter whose
// `wait` runs out, or whose signal aborts, while its owner is queued in Redis must not
// be handed the key by the holder's next release: that release frees the key (or hands
// it to a waiter that still waits), so a fail-fast try right after it succeeds. On
// ioredis and node-redis, standalone and on a 3-master cluster, through the real engine.
// Run: node --test js-tests/redis-give-up.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { acquireLock, engine } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { call, startRedisCluster, startRedisServer, waitFor } from './support/redis.mjs';
import { noUnhandledRejections, within } from './support/async.mjs';
import {
  closeIoredis,
  closeNodeRedis,
  connectIoredis,
  connectIoredisCluster,
  connectNodeRedis,
  connectNodeRedisCluster,
} from './support/redis-clients.mjs';
import { uniqueKey } from './support/keys.mjs';

noUnhandledRejections(before, after);

let server;
let cluster;
const opened = []; // [close, client]
const stores = [];

before(async () => {
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const [close, client] of opened) close(client);
  await Promise.allSettled([server?.stop(), cluster?.stop()]);
});

const SETUPS = [
  { name: 'ioredis', connect: () => connectIoredis(server.port), close: closeIoredis, cluster: false },
  { name: 'node-redis', connect: () => connectNodeRedis(server.port), close: closeNodeRedis, cluster: false },
  { name: 'ioredis Cluster', connect: () => connectIoredisCluster(cluster.nodes), close: closeIoredis, cluster: true },
  { name: 'node-redis cluster', connect: () => connectNodeRedisCluster(cluster.nodes), close: closeNodeRedis, cluster: true },
];

/** The length of `key`'s Redis queue (on the node that serves it). */
async function queueLength(setup, prefix, key) {
  const name = `${prefix}:{${key}}:queue`;
  const port = setup.cluster ? await cluster.nodeFor(name) : server.port;
  return call(port, ['LLEN', name]);
}

async function newStore(setup, prefix) {
  const client = await setup.connect();
  opened.push([setup.close, client]);
  const store = new RedisLockStore({ client, prefix });
  stores.push(store);
  return store;
}

test(`the engine in use is the one asked for (${engine})`, () => {
  assert.equal(engine, process.env.LEASEHOLD_ENGINE || 'native');
});

for (const setup of SETUPS) {
  describe(setup.name, () => {
    // The reproducer, on one store: the waiter's `wait` runs out while it is
    // queued; the release that follows must leave the key free. (Leases of 5 s rather
    // than the 300 ms: a loaded machine can take longer than that to answer.)
    test('a waiter whose wait ran out is not handed the key: the next try takes it', async () => {
      const prefix = 'give-up';
      const s = await newStore(setup, prefix);
      for (let round = 0; round < 5; round++) {
        const key = uniqueKey('waited');
        const a = await acquireLock(s, key, 5000, { autoRenew: true });
        assert.ok(a, 'A holds the key');
        // Long enough for the waiter to be queued in Redis (its store listens for grants
        // from its first wait, and its next try queues it).
        assert.equal(await acquireLock(s, key, 5000, { wait: 250 }), undefined, 'B gave up');
        assert.equal(await queueLength(setup, prefix, key), 0, 'B left the queue');
        assert.equal(await a.release(), true);
        const c = await acquireLock(s, key, 5000, { wait: 0 });
        assert.ok(c, `round ${round}: the key was free right after the release`);
        assert.ok(c.fencingToken > a.fencingToken);
        assert.equal(await c.release(), true);
      }
    });

    // Aborted by its signal, the waiter makes no last try: its store takes it out of
    // the queue when the engine stops listening on the key. A release through another
    // store (another process) then finds nobody queued.
    test('a waiter whose signal aborted leaves the queue; a release through another store frees the key', async () => {
      const prefix = 'give-up-abort';
      const holder = await newStore(setup, prefix);
      const waiter = await newStore(setup, prefix);
      const key = uniqueKey('aborted');
      const a = await acquireLock(holder, key, 5000, { autoRenew: true });
      assert.ok(a, 'A holds the key');
      const controller = new AbortController();
      const b = acquireLock(waiter, key, 5000, { wait: '30s', signal: controller.signal });
      await waitFor('B to be queued in Redis', async () => (await queueLength(setup, prefix, key)) === 1, {
        timeoutMs: 10_000,
        intervalMs: 10,
      });
      controller.abort(new Error('B stops waiting'));
      await assert.rejects(within(2000, 'B gives up', b), /B stops waiting/);
      await waitFor('B to leave the queue', async () => (await queueLength(setup, prefix, key)) === 0, {
        timeoutMs: 10_000,
        intervalMs: 5,
      });
      assert.equal(await a.release(), true);
      const c = await acquireLock(holder, key, 5000, { wait: 0 });
      assert.ok(c, 'the key was free right after the release');
      assert.equal(await c.release(), true);
    });

    // Two waiters, the first gives up: the release hands the key to the one still
    // waiting, not to the one that left.
    test('of two queued waiters, the one still waiting is handed the key when the first gave up', async () => {
      const prefix = 'give-up-two';
      const holder = await newStore(setup, prefix);
      const quitter = await newStore(setup, prefix);
      const patient = await newStore(setup, prefix);
      const key = uniqueKey('two');
      const a = await acquireLock(holder, key, 5000, { autoRenew: true });
      const controller = new AbortController();
      const b = acquireLock(quitter, key, 5000, { wait: '30s', signal: controller.signal });
      await waitFor('B queued', async () => (await queueLength(setup, prefix, key)) === 1, { timeoutMs: 10_000, intervalMs: 10 });
      const c = acquireLock(patient, key, 5000, { wait: '30s' });
      await waitFor('C queued behind B', async () => (await queueLength(setup, prefix, key)) === 2, { timeoutMs: 10_000, intervalMs: 10 });
      controller.abort();
      await assert.rejects(b, { name: 'AbortError' });
      await waitFor('B to leave the queue', async () => (await queueLength(setup, prefix, key)) === 1, { timeoutMs: 10_000, intervalMs: 5 });
      assert.equal(await a.release(), true);
      const lease = await within(3000, 'C is handed the key', c);
      assert.ok(lease && lease.fencingToken > a.fencingToken);
      assert.equal(await lease.release(), true);
    });
  });
}

// Two waiters of one process (one store), queued behind a holder of another: the first
// is aborted while the second still waits, so the engine keeps listening on the key and
// no unwatch dequeues anyone; the engine releases the aborted owner, which takes it out
// of the Redis queue. The holder's release then hands the key straight to the second.
for (const setup of SETUPS) {
  test(`${setup.name}: a waiter aborted while another of its process waits leaves the queue`, async () => {
    const prefix = 'give-up-sibling';
    const holder = await newStore(setup, prefix);
    const waiters = await newStore(setup, prefix);
    const key = uniqueKey('sibling');
    const a = await acquireLock(holder, key, 5000, { autoRenew: true });
    assert.ok(a, 'H holds the key');
    const controller = new AbortController();
    const w1 = acquireLock(waiters, key, 5000, { wait: '30s', signal: controller.signal });
    await waitFor('W1 queued', async () => (await queueLength(setup, prefix, key)) === 1, { timeoutMs: 10_000, intervalMs: 10 });
    const w2 = acquireLock(waiters, key, 5000, { wait: '30s' });
    await waitFor('W2 queued behind W1', async () => (await queueLength(setup, prefix, key)) === 2, {
      timeoutMs: 10_000,
      intervalMs: 10,
    });
    controller.abort();
    await assert.rejects(w1, { name: 'AbortError' });
    // W2 still waits, so only the engine's release of W1's owner can dequeue it.
    await waitFor('W1 to leave the queue', async () => (await queueLength(setup, prefix, key)) === 1, {
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    assert.equal(await a.release(), true);
    const lease = await within(3000, 'W2 is handed the key', w2);
    assert.ok(lease && lease.fencingToken > a.fencingToken, 'W2 holds the key with a newer token');
    assert.equal(await queueLength(setup, prefix, key), 0, 'nobody left queued');
    assert.equal(await lease.release(), true);
  });
}
