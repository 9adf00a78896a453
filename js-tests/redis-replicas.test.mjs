// Replica acknowledgement (`minReplicas`, `replicaTimeout`) and what a promoted replica
// knows, on real servers: a standalone Redis without replicas (WAIT never satisfied: the
// acquire is undone and reported as a store failure, the key left free), and a primary
// with 2 replicas behind 3 Sentinels: a lease acknowledged by a replica survives the
// primary's SIGKILL; a lease the replicas never saw does not, and the next grant on
// the promoted replica still has the larger token, and the old holder learns at its
// next renewal.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Redis from 'ioredis';
import { createSentinel } from 'redis';
import { RedisLockStore } from 'leasehold/redis';
import { acquireLock, FakeTimeProvider, LockStoreError, ResiliencePipelineBuilder } from './support/leasehold.mjs';
import { within } from './support/async.mjs';
import { call, commandStats, startRedisServer, waitFor } from './support/redis.mjs';
import { connectIoredis, connectIoredisCluster, connectNodeRedis, connectNodeRedisCluster } from './support/redis-clients.mjs';
import { startReplicatedCluster, startSentinelGroup } from './support/redis-failover.mjs';

const noop = () => {};

describe('minReplicas options', () => {
  const client = new Redis({ lazyConnect: true });
  test('bad values are refused with errors that name them', () => {
    for (const minReplicas of [-1, 1.5, '1', Number.NaN]) {
      assert.throws(() => new RedisLockStore({ client, minReplicas }), { name: 'RangeError', message: /minReplicas must be a non-negative integer/ });
    }
    for (const replicaTimeout of [0, -5, 2.5, '1s']) {
      assert.throws(() => new RedisLockStore({ client, minReplicas: 1, replicaTimeout }), { name: 'RangeError', message: /replicaTimeout must be a positive integer/ });
    }
    assert.throws(() => new RedisLockStore({ client, replicaTimeout: 100 }), { name: 'TypeError', message: /replicaTimeout is only used with minReplicas/ });
    assert.ok(new RedisLockStore({ client, minReplicas: 0 }).grantsOnRelease !== undefined);
    // waiters are woken, not handed leases, when grants must be acknowledged
    assert.equal(new RedisLockStore({ client, minReplicas: 1 }).grantsOnRelease, false);
  });
});

describe('minReplicas without enough replicas', { timeout: 30_000 }, () => {
  let server;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    await server?.stop();
  });
  for (const [kind, connect, close] of [
    ['ioredis', connectIoredis, (c) => c.disconnect()],
    ['node-redis', connectNodeRedis, (c) => c.destroy()],
  ]) {
    test(`${kind}: the acquire is undone and fails as a store failure, the key is left free`, async () => {
      const client = await connect(server.port);
      try {
        const store = new RedisLockStore({ client, minReplicas: 1, replicaTimeout: 50 });
        const key = `unreplicated-${kind}`;
        const err = await acquireLock(store, key, 5000).then(() => undefined, (e) => e);
        assert.ok(err instanceof LockStoreError, `expected a LockStoreError, got ${err}`);
        assert.equal(err.method, 'acquire');
        assert.equal(err.cause?.code, 'REPLICAS_NOT_ACKNOWLEDGED');
        assert.match(err.cause.message, /reached 0 of the 1 replicas .* within 50 ms/);
        assert.equal(await store.isLocked(key), false, 'no stuck key');
        // a store without acknowledgement takes it at once
        const plain = new RedisLockStore({ client });
        assert.ok((await plain.acquire(key, 'someone', 5000))?.fencingToken > 0);
      } finally {
        close(client);
      }
    });
  }
});

describe('leases across a Sentinel failover', { timeout: 120_000 }, () => {
  let group;
  let client;
  let store;
  let acked;
  let sentinel; // node-redis's Sentinel client
  let woken; // a store per client whose subscriber is opened before the failovers
  before(async () => {
    group = await startSentinelGroup();
    client = new Redis({ sentinels: group.sentinels, name: group.name, retryStrategy: () => 100, sentinelRetryStrategy: () => 100 });
    client.on('error', noop);
    store = new RedisLockStore({ client });
    acked = new RedisLockStore({ client, minReplicas: 1, replicaTimeout: 500 });
    sentinel = createSentinel({ name: group.name, sentinelRootNodes: group.sentinels, nodeClientOptions: { socket: { reconnectStrategy: () => 100 } } });
    sentinel.on('error', noop);
    await sentinel.connect();
    woken = [new RedisLockStore({ client }), new RedisLockStore({ client: sentinel })];
    for (const s of woken) s.subscribe('opens-the-subscriber', noop)();
  });
  after(async () => {
    for (const s of woken ?? []) await s.close();
    client?.disconnect();
    sentinel?.destroy();
    await group?.stop();
  });

  test('minReplicas: replicas cut off, the acquire is undone on the primary and reported', async () => {
    const primary = await group.isolatePrimary();
    try {
      await assert.rejects(acked.acquire('cut-off', 'a', 10_000), { code: 'REPLICAS_NOT_ACKNOWLEDGED' });
      assert.equal(await store.isLocked('cut-off'), false);
      assert.equal(await group.primaryPort(), primary);
    } finally {
      await group.rejoinReplicas();
      await group.waitForReplicas(2);
    }
  });

  test('minReplicas: 1: the primary killed right after an acquire returns, the lease survives on the promoted replica', async () => {
    const granted = await acked.acquire('survives', 'holder', 20_000);
    const old = await group.killPrimary();
    const promoted = await group.waitForNewPrimary(old);
    assert.notEqual(promoted, old);
    assert.equal(await acked.acquire('survives', 'intruder', 20_000), undefined, 'still held on the promoted replica');
    assert.equal(await acked.renew('survives', 'holder', 20_000), true, 'the holder renews it there');
    const next = await acked.release('survives', 'holder').then(() => acked.acquire('survives', 'next', 1000));
    assert.ok(next.fencingToken > granted.fencingToken);
  });

  test('a lease the replicas never saw: the promoted replica grants it again with a larger token; the old holder learns at its renewal', async () => {
    await group.waitForReplicas(1);
    const old = await group.isolatePrimary();
    const lost = await store.acquire('missed', 'first', 20_000); // only on the old primary
    await group.killPrimary();
    await group.rejoinReplicas();
    await group.waitForNewPrimary(old);
    const second = await store.acquire('missed', 'second', 20_000);
    assert.ok(second !== undefined, 'the promoted replica never saw the first lease: granted twice');
    assert.ok(second.fencingToken > lost.fencingToken, `token ${second.fencingToken} after ${lost.fencingToken}`);
    assert.equal(await store.renew('missed', 'first', 20_000), false, 'the first holder learns it at its next renewal');
  });

  test('after two failovers, waiters are woken through subscribers that followed the promoted primary (ioredis, node-redis)', async () => {
    const primary = await group.primaryPort();
    for (const [i, s] of woken.entries()) {
      const key = `woken-${i}`;
      // Fake time that never moves: the waiter never polls, only a message can wake it.
      const pipeline = new ResiliencePipelineBuilder({ timeProvider: new FakeTimeProvider() }).addLock({ key, store: s, ttl: '30s', wait: '60s' }).build();
      await s.acquire(key, 'holder', 30_000);
      const waiter = pipeline.execute(() => 'ran');
      await waitFor('the waiter to listen on the promoted primary', async () => {
        const [, listening] = await call(primary, ['PUBSUB', 'NUMSUB', `lock:{${key}}:released`]);
        return listening > 0;
      }, { timeoutMs: 15_000 });
      await s.release(key, 'holder');
      assert.equal(await within(15_000, 'the waiter woken by the release', waiter), 'ran');
    }
  });
});

describe('minReplicas on a Cluster whose masters have a replica', { timeout: 60_000 }, () => {
  let cluster;
  before(async () => {
    cluster = await startReplicatedCluster();
  });
  after(async () => {
    await cluster?.stop();
  });
  const waits = async (port) => (await commandStats(port)).wait?.calls ?? 0;
  for (const [kind, connect, close] of [
    ['ioredis', connectIoredisCluster, (c) => c.disconnect()],
    ['node-redis', connectNodeRedisCluster, (c) => c.destroy()],
  ]) {
    test(`${kind}: WAIT goes to the master of the key, on the connection that wrote`, async () => {
      const client = await connect(cluster.nodes);
      try {
        const store = new RedisLockStore({ client, minReplicas: 1, replicaTimeout: 1000 });
        const key = `cluster-acked-${kind}`;
        const master = await cluster.masterFor(`{${key}}`);
        const masters = await Promise.all(cluster.nodes.map(async (n) => ((await call(n.port, ['ROLE']))[0] === 'master' ? n.port : undefined)));
        const before = new Map(await Promise.all(masters.filter(Boolean).map(async (p) => [p, await waits(p)])));
        const granted = await store.acquire(key, 'holder', 10_000);
        assert.ok(granted.fencingToken > 0);
        assert.equal(await store.renew(key, 'holder', 10_000), true);
        for (const [port, count] of before) {
          const delta = (await waits(port)) - count;
          if (port === master) assert.equal(delta, 2, 'the acquire and the renewal waited on the key\'s master');
          else assert.equal(delta, 0, `no WAIT on master ${port}, which does not hold the key`);
        }
        assert.equal(await store.release(key, 'holder'), true);
      } finally {
        close(client);
      }
    });
  }
});
