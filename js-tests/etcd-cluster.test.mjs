// EtcdLockStore on a real three-member etcd cluster (support/etcd.mjs, heartbeat 50 ms,
// election timeout 500 ms) whose leader is killed (SIGKILL) while a lease is held and
// while waiters wait: never two holders, tokens strictly increasing in grant order, the
// holder told of a loss within ttl/3 plus a round trip, waiters served once a new leader
// is elected; with a member down, a keep-alive whose stream opened on it is sent again;
// without a majority, an acquire gives up in time and leaves the client's hosts usable.
// Through the real engine, on both engines (LEASEHOLD_ENGINE).
// Run: node --test js-tests/etcd-cluster.test.mjs

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { ResiliencePipelineBuilder, LockLostError, getLockToken } from 'leasehold';
import { EtcdLockStore } from 'leasehold/etcd';
import { startEtcdCluster } from './support/etcd.mjs';
import { pollUntil, within } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

const clusters = [];
const clients = [];
const stores = [];

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const c of clients) c.close();
  for (const c of clusters) await c.stop();
  assert.deepEqual(unhandled, []);
});

async function cluster() {
  const c = await startEtcdCluster(3);
  clusters.push(c);
  return c;
}

function storeOn(c) {
  const client = new Etcd3({ hosts: c.endpoints });
  clients.push(client);
  const store = new EtcdLockStore({ client });
  stores.push(store);
  return { client, store };
}

/** Records who holds the lock: overlaps, and tokens in the order the holders began. */
function recorder() {
  const r = { inside: 0, overlaps: 0, tokens: [] };
  r.enter = () => {
    r.inside += 1;
    if (r.inside > 1) r.overlaps += 1;
    r.tokens.push(getLockToken());
  };
  r.leave = () => {
    r.inside -= 1;
  };
  return r;
}

/** `promise`, whose rejection names its cause (a store's error) in its message. */
function withCause(promise) {
  return promise.catch((err) => {
    throw err?.cause === undefined ? err : new Error(`${err.message}: ${err.cause?.name}: ${err.cause?.message}`, { cause: err });
  });
}

/** How many holders and waiters have a key under `key` in etcd. */
async function keysUnder(client, key) {
  return Number(await client.getAll().prefix(`leasehold/${key}/`).count());
}

function assertRising(tokens) {
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${i} (${tokens[i]}) > ${tokens[i - 1]}`);
}

test('the leader killed while a lease is held: the holder keeps it, then a revoked lease is told within ttl/3 + a round trip', async () => {
  const c = await cluster();
  const key = uniqueKey('held');
  const ttlMs = 3_000;
  const holderSide = storeOn(c);
  const waiterSide = storeOn(c);
  const r = recorder();
  const lost = [];
  const holderLock = new ResiliencePipelineBuilder()
    .addLock({ key, store: holderSide.store, ttl: ttlMs, onLockLost: () => lost.push(performance.now()) })
    .build();
  const waiterLock = new ResiliencePipelineBuilder().addLock({ key, store: waiterSide.store, ttl: ttlMs, wait: '30s' }).build();

  let lostAt;
  let revokedAt;
  let rtt;
  let queued;
  let left = false;
  const waiterQueued = new Promise((resolve) => {
    queued = resolve;
  });
  let began;
  const holderBegan = new Promise((resolve) => {
    began = resolve;
  });
  const holding = holderLock.execute(async ({ signal }) => {
    r.enter();
    began();
    try {
      await waiterQueued; // a try in flight while the leader dies may wait out etcd's proposal timeout
      const leader = await c.leader();
      await leader.kill();
      await c.healthy();
      // Two renewals (every ttl/3) after the new leader: the lease survived the failover.
      await sleep((2 * ttlMs) / 3 + 200);
      assert.equal(signal.aborted, false, 'the lease survives a change of leader');
      // Now the lease is lost for real: revoked on the server, as if it had run out. From
      // here the waiter may hold it: this holder is no longer one (its writes are fenced).
      r.leave();
      left = true;
      const t = performance.now();
      await holderSide.client.get('x');
      rtt = performance.now() - t;
      const leases = await holderSide.client.leaseClient.leaseLeases({});
      const mine = (await holderSide.client.getAll().prefix(`leasehold/${key}/`).sort('Create', 'Ascend').exec()).kvs[0];
      assert.ok(leases.leases.some((l) => l.ID === mine.lease));
      await holderSide.client.leaseClient.leaseRevoke({ ID: mine.lease });
      revokedAt = performance.now();
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      lostAt = performance.now();
      throw signal.reason;
    } finally {
      if (!left) r.leave();
    }
  });
  // The holder first (a pause would not do: a loaded machine can make its first try, a
  // new connection and a lease grant, slower than the waiter's), then the waiter queued.
  await within(10_000, 'the holder', Promise.race([holderBegan, holding]));
  const waiting = waiterLock.execute(async () => {
    r.enter();
    await sleep(20);
    r.leave();
  });
  await pollUntil('the waiter queued', async () => (await keysUnder(waiterSide.client, key)) >= 2, { timeoutMs: 10_000, intervalMs: 10 });
  queued();
  await assert.rejects(within(20_000, 'the holder', holding), LockLostError);
  await within(20_000, 'the waiter', waiting);
  const told = lostAt - revokedAt;
  assert.ok(told <= ttlMs / 3 + rtt + 500, `told of the loss ${Math.round(told)} ms after it (ttl/3 = ${ttlMs / 3}, round trip ${rtt.toFixed(1)} ms)`);
  assert.equal(lost.length, 1);
  assert.equal(r.overlaps, 0);
  assert.equal(r.tokens.length, 2);
  assertRising(r.tokens);
  process.stderr.write(`told of the loss ${Math.round(told)} ms after the revoke (ttl/3 ${ttlMs / 3} ms, round trip ${rtt.toFixed(1)} ms)\n`);
});

test('the leader killed while waiters wait: all served, in order, one at a time, once a new leader is elected', async () => {
  const c = await cluster();
  const key = uniqueKey('waiting');
  const sides = [storeOn(c), storeOn(c)];
  const r = recorder();
  const order = [];
  const pipelines = sides.map(({ store }) => new ResiliencePipelineBuilder().addLock({ key, store, ttl: '3s', wait: '30s' }).build());
  let release;
  const holding = pipelines[0].execute(async () => {
    r.enter();
    await new Promise((resolve) => {
      release = resolve;
    });
    r.leave();
  });
  await pollUntil('the holder holds', () => release !== undefined, { timeoutMs: 10_000, intervalMs: 10 });
  const waiters = [];
  for (let i = 0; i < 6; i++) {
    waiters.push(
      pipelines[i % 2].execute(async () => {
        r.enter();
        order.push(i);
        await sleep(10);
        r.leave();
      }),
    );
    // Queued one after the other: its key is in etcd before the next one tries (a pause
    // would not do: two stores' tries on two connections may reach etcd in either order).
    await pollUntil(`waiter ${i} queued`, async () => (await keysUnder(sides[0].client, key)) >= i + 2, { timeoutMs: 10_000, intervalMs: 10 });
  }
  const leader = await c.leader();
  await leader.kill();
  const killedAt = performance.now();
  await c.healthy();
  const electedAt = performance.now();
  await sleep(300);
  release();
  await within(20_000, 'the holder and every waiter', Promise.all([holding, ...waiters]));
  assert.equal(r.overlaps, 0);
  assert.equal(r.tokens.length, 7);
  assertRising(r.tokens);
  // Across the two stores (processes, as far as etcd knows), in the order they queued.
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
  assert.ok(electedAt - killedAt < 10_000);
});

test('tries in flight while the leader dies are answered once a new leader is elected, within their ttl', async () => {
  const c = await cluster();
  const key = uniqueKey('inflight');
  const sides = [storeOn(c), storeOn(c), storeOn(c), storeOn(c)];
  // Each store has taken and released a lock once: its next try reuses that lease.
  for (const { store } of sides) await new ResiliencePipelineBuilder().addLock({ key: `${key}-warm`, store, ttl: '3s' }).build().execute(() => 0);
  const r = recorder();
  const leader = await c.leader();
  const started = performance.now();
  const runs = sides.map(({ store }) =>
    new ResiliencePipelineBuilder()
      .addLock({ key, store, ttl: '3s', wait: '30s' })
      .build()
      .execute(async () => {
        r.enter();
        await sleep(10);
        r.leave();
        return performance.now() - started;
      }),
  );
  await leader.kill();
  const took = await within(20_000, 'every execution', Promise.all(runs.map(withCause)));
  assert.equal(r.overlaps, 0);
  assert.equal(r.tokens.length, 4);
  assertRising(r.tokens);
  // The first holder got its answer well within the ttl (3 s), not after etcd's 5 s request timeout.
  assert.ok(Math.min(...took) < 3_000, `first holder after ${Math.round(Math.min(...took))} ms`);
});

test('a member down: a waiter handed the lock and asking again gets it, though its keep-alive stream opened on that member', async () => {
  const c = await cluster();
  const leader = await c.leader();
  const down = c.members.find((m) => m !== leader);
  await down.kill();
  const key = uniqueKey('member-down');
  const { store: holderStore } = storeOn(c);
  const { client, store } = storeOn(c);
  // The client opens each stream on a host it picks at random, the member that is down
  // among them: this one's first keep-alive stream is opened there, as it may be.
  const downClient = new Etcd3({ hosts: [c.endpoints[c.members.indexOf(down)]] });
  clients.push(downClient);
  const leaseKeepAlive = client.leaseClient.leaseKeepAlive.bind(client.leaseClient);
  let streams = 0;
  client.leaseClient.leaseKeepAlive = (...args) => (++streams === 1 ? downClient.leaseClient.leaseKeepAlive(...args) : leaseKeepAlive(...args));
  const held = await holderStore.acquire(key, 'holder', 3_000);
  assert.ok(held);
  const grants = [];
  const stop = store.subscribe(key, (grant) => grants.push(grant) > 0);
  assert.equal(await store.acquire(key, 'waiter', 3_000, { queue: true }), undefined);
  assert.equal(await holderStore.release(key, 'holder'), true);
  await pollUntil('the grant', () => grants.length === 1, { timeoutMs: 10_000, intervalMs: 10 });
  // The engine asks again for a grant too old to count on: one keep-alive, then the lease.
  const again = await store.acquire(key, 'waiter', 3_000, { queue: true });
  assert.equal(again?.fencingToken, grants[0].fencingToken);
  assert.ok(again.fencingToken > held.fencingToken);
  assert.ok(streams >= 2, 'the keep-alive was sent again on a new stream');
  stop();
  assert.equal(await store.release(key, 'waiter'), true);
});

test('no majority: an acquire gives up within its ttl, and leaves the client usable once the majority is back', async () => {
  const c = await cluster();
  const { client, store } = storeOn(c);
  await client.put('probe').value('1');
  const leader = await c.leader();
  const paused = c.members.filter((m) => m !== leader);
  for (const m of paused) m.pause(); // the leader can commit nothing
  let resumed = false;
  try {
    const started = performance.now();
    await assert.rejects(within(10_000, 'the acquire', store.acquire(uniqueKey('no-majority'), 'owner', 3_000)));
    const took = performance.now() - started;
    assert.ok(took < 3_000, `gave up after ${Math.round(took)} ms`);
    for (const m of paused) m.resume();
    resumed = true;
    await c.healthy();
    // Its tries, each given a slice of the time left, did not trip the client's circuit
    // breakers (3 failures in a row close a host to every call for 5 s).
    assert.equal(await within(5_000, 'a read', client.get('probe').string()), '1');
  } finally {
    if (!resumed) for (const m of paused) m.resume();
  }
});
