// RedisLockStore's `inspect` and `list` against real servers, with both client
// libraries, standalone and Cluster: a held key with two queued waiters read exactly,
// a missing key, a lease just expired; `list` by prefix and limit, and over 100,000
// keys in pages (SCAN, never KEYS), with the longest command measured by SLOWLOG
// (20,000 keys here; `npm run bench:list` runs 100,000).
// Run: node --test js-tests/redis-inspect.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Redis from 'ioredis';
import { RedisLockStore } from 'leasehold/redis';
import { call, commandStats, startRedisCluster, startRedisServer, waitFor } from './support/redis.mjs';
import { connectIoredisCluster, connectNodeRedisCluster, NAMED_CLIENTS } from './support/redis-clients.mjs';
import { checkHeldWithTwoWaiters, holdWithWaiters } from './support/inspect-scenario.mjs';
import { noUnhandledRejections } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';

noUnhandledRejections(before, after);

let server;
let cluster;
const closers = [];

before(async () => {
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
});

after(async () => {
  for (const close of closers.reverse()) await close();
  await Promise.all([server?.stop(), cluster?.stop()]);
});

async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Stores on connections of their own, closed after the file. */
async function storesOn(connect, close, n, options = {}) {
  const stores = [];
  for (let i = 0; i < n; i++) {
    const client = await connect();
    const store = new RedisLockStore({ client, ...options });
    stores.push(store);
    closers.push(async () => {
      await store.close();
      close(client);
    });
  }
  return stores;
}

const SETUPS = [
  ...Object.values(NAMED_CLIENTS).map((kind) => ({
    name: `${kind.name} standalone`,
    connect: () => kind.connect(server.port, `inspect-${kind.name}`),
    close: kind.close,
  })),
  {
    name: 'ioredis Cluster',
    connect: () => connectIoredisCluster(cluster.nodes),
    close: (c) => c.disconnect(),
  },
  {
    name: 'node-redis Cluster',
    connect: () => connectNodeRedisCluster(cluster.nodes),
    close: (c) => c.destroy(),
  },
];

for (const setup of SETUPS) {
  describe(`inspect and list, ${setup.name}`, () => {
    test('a held key with two waiters: holder, token, time left, waiters in order', async () => {
      const [a, b, c] = await storesOn(setup.connect, setup.close, 3);
      const key = uniqueKey('inspect {held}');
      const scenario = await holdWithWaiters({ holderStore: a, waiterStores: [b, c], key, inspect: () => a.inspect(key) });
      const inspection = await a.inspect(key);
      assert.equal(inspection.key, key);
      const now = Date.now();
      await checkHeldWithTwoWaiters(scenario, inspection, {
        since: (since) => assert.ok(Math.abs(since - now) < 60_000, `queued since ${since}, the server's clock`),
      });
      assert.equal(await a.inspect(key), undefined, 'nothing left once everyone ran');
    });

    test('a missing key, and a lease that just expired', async () => {
      const [store] = await storesOn(setup.connect, setup.close, 1);
      assert.equal(await store.inspect(uniqueKey('never')), undefined);
      const key = uniqueKey('expiring');
      const got = await store.acquire(key, 'short-lived', 30);
      const seen = await store.inspect(key);
      if (seen !== undefined) assert.deepEqual(seen.holders.map((h) => h.owner), ['short-lived']);
      await waitFor('the lease to expire', async () => (await store.ttl(key)) === undefined, { timeoutMs: 2_000 });
      assert.ok(got);
      assert.equal(await store.inspect(key), undefined, 'an expired lease shows nothing');
      assert.deepEqual(await collect(store.list({ prefix: key })), []);
    });

    test('list: held keys by prefix, up to a limit, decoded', async () => {
      const [store] = await storesOn(setup.connect, setup.close, 1, { prefix: 'lst*' });
      const base = uniqueKey('list');
      const keys = [`${base}/a`, `${base}/{b}`, `${base}/%c*`, `${base}/d?[x]`, `${base}x`];
      for (const key of keys) assert.ok(await store.acquire(key, 'o', 10_000));
      await store.acquire(`${base}/gone`, 'o', 10_000);
      await store.release(`${base}/gone`, 'o');
      const all = await collect(store.list({ prefix: `${base}/` }));
      assert.deepEqual(all.sort(), keys.slice(0, 4).sort(), 'held keys under the prefix, braces and globs included');
      assert.equal((await collect(store.list({ prefix: base, limit: 2 }))).length, 2);
      assert.deepEqual(await collect(store.list({ prefix: base, limit: 0 })), []);
      const other = (await storesOn(setup.connect, setup.close, 1, { prefix: 'lst' }))[0];
      assert.deepEqual(await collect(other.list({ prefix: base })), [], "another store prefix's keys are not listed");
      assert.throws(() => store.list({ prefix: 1 }), TypeError);
      assert.throws(() => store.list({ limit: -1 }), RangeError);
      await assert.rejects(store.inspect(''), TypeError);
    });
  });
}

/** Writes `n` leases named as `prefix`'s store names them, straight to a node (setup). */
async function writeLeases(port, names) {
  const client = new Redis({ host: '127.0.0.1', port });
  try {
    for (let i = 0; i < names.length; i += 10_000) {
      const pipeline = client.pipeline();
      for (const name of names.slice(i, i + 10_000)) pipeline.set(name, 'bulk-owner', 'PX', 120_000);
      await pipeline.exec();
    }
  } finally {
    client.disconnect();
  }
}

/**
 * SCAN calls, the longest SCAN (µs) and the longest command of any kind (name and µs)
 * each node's SLOWLOG saw since `resetSlowlog`.
 */
async function slowlogs(ports) {
  let longest = 0;
  let scans = 0;
  let slowest = { name: '', micros: 0 };
  const times = [];
  for (const port of ports) {
    for (const [, , micros, args] of await call(port, ['SLOWLOG', 'GET', '-1'])) {
      const name = String(args[0]).toUpperCase();
      if (micros > slowest.micros) slowest = { name, micros };
      if (name !== 'SCAN') continue;
      scans++;
      times.push(micros);
      longest = Math.max(longest, micros);
    }
  }
  const median = times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
  return { longest, scans, slowest, median };
}

async function resetSlowlog(ports) {
  for (const port of ports) {
    await call(port, ['CONFIG', 'SET', 'slowlog-log-slower-than', '0']);
    await call(port, ['CONFIG', 'SET', 'slowlog-max-len', '100000']);
    await call(port, ['SLOWLOG', 'RESET']);
  }
}

/** CRC16/XMODEM, as Redis Cluster hashes a key's tag into one of 16384 slots. */
function slotOf(tag) {
  let crc = 0;
  for (const byte of Buffer.from(tag)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

// 20,000 keys in `npm test` (a few seconds); `npm run bench:list` runs the same with
// 100,000 (LEASEHOLD_LIST_KEYS).
const BULK = Number(process.env.LEASEHOLD_LIST_KEYS ?? 20_000);

describe(`list over ${BULK} keys`, () => {
  test('standalone: pages of SCAN, lazy, every key once, no command long', async (t) => {
    const names = Array.from({ length: BULK }, (_, i) => `bulk:{k${i}}`);
    await writeLeases(server.port, [...names, ...names.slice(0, 1000).map((n) => `${n}:token`)]);
    const client = await NAMED_CLIENTS.ioredis.connect(server.port, 'bulk');
    const store = new RedisLockStore({ client, prefix: 'bulk' });
    closers.push(async () => {
      await store.close();
      client.disconnect();
    });
    await resetSlowlog([server.port]);
    const before = (await commandStats(server.port)).scan?.calls ?? 0;
    const iterator = store.list();
    const seen = new Set([(await iterator.next()).value]);
    assert.equal(((await commandStats(server.port)).scan?.calls ?? 0) - before, 1, 'one SCAN for the first key: lazy');
    for await (const key of iterator) seen.add(key);
    assert.equal(seen.size, BULK, 'every lease listed, no token key');
    assert.ok([...seen].every((key) => /^k\d+$/.test(key)));
    const { longest, scans, slowest, median } = await slowlogs([server.port]);
    t.diagnostic(`${scans} SCAN calls (median ${median} µs), the longest ${longest} µs; the longest command of any kind: ${slowest.name}, ${slowest.micros} µs`);
    assert.ok(scans >= BULK / 1000 / 2, `${scans} SCAN calls: the walk is paged`);
    assert.equal((await commandStats(server.port)).keys, undefined, 'never KEYS');
    assert.ok(longest < 50_000, `the longest SCAN took ${longest} µs`);
    await call(server.port, ['CONFIG', 'SET', 'slowlog-log-slower-than', '10000']);
  });

  test('Cluster: each master walked, every key once', async (t) => {
    const byPort = new Map(cluster.ports.map((p) => [p, []]));
    for (let i = 0; i < BULK; i++) byPort.get(cluster.slotOwner(slotOf(`k${i}`))).push(`bulk:{k${i}}`);
    await Promise.all([...byPort].map(([port, names]) => writeLeases(port, names)));
    const client = await connectIoredisCluster(cluster.nodes);
    const store = new RedisLockStore({ client, prefix: 'bulk' });
    closers.push(async () => {
      await store.close();
      client.disconnect();
    });
    await resetSlowlog(cluster.ports);
    const seen = new Set();
    for await (const key of store.list()) seen.add(key);
    assert.equal(seen.size, BULK, 'every key of every master');
    const { longest, scans, slowest, median } = await slowlogs(cluster.ports);
    t.diagnostic(`${scans} SCAN calls over ${cluster.ports.length} masters (median ${median} µs), the longest ${longest} µs; the longest command of any kind: ${slowest.name}, ${slowest.micros} µs`);
    assert.ok(scans >= BULK / 1000 / 2, `${scans} SCAN calls: each master's walk is paged`);
    assert.ok(longest < 50_000, `the longest SCAN took ${longest} µs`);
  });
});
