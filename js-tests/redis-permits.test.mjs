// RedisLockStore's permits (`acquire(key, owner, ttl, { queue, limit, weight })`), store
// level, on a real standalone server and a real 3-master Cluster, through ioredis and
// node-redis: weights summed within the limit, readers together and a writer alone, the
// grant queue handing permits on from its head in order (a head that does not fit stops
// it), one limit per key ({ limit } answers both ways), each owner's renew, release and
// lapse, rising tokens, inspect, and bad options refused.
// Run: node --test js-tests/redis-permits.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisLockStore } from 'leasehold/redis';
import { call, startRedisCluster, startRedisServer } from './support/redis.mjs';
import { pollUntil, noUnhandledRejections } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';
import {
  closeIoredis,
  closeNodeRedis,
  connectIoredis,
  connectIoredisCluster,
  connectNodeRedis,
  connectNodeRedisCluster,
} from './support/redis-clients.mjs';

noUnhandledRejections(before, after);

const SHARED = 2147483647;
const TTL = 10_000;
const permit = (limit, weight, queue = false) => ({ queue, limit, weight });
// Bounds that only catch a hang.
const BOUND = { timeoutMs: 5_000, intervalMs: 10 };

const CLIENTS = [
  { name: 'ioredis', connect: connectIoredis, connectCluster: connectIoredisCluster, close: closeIoredis },
  { name: 'node-redis', connect: connectNodeRedis, connectCluster: connectNodeRedisCluster, close: closeNodeRedis },
];

/**
 * Every case, on stores made by `open(prefix)` (each on a client of its own); `ports()`
 * the servers' ports (grant channels are looked for on each).
 */
function cases(open, ports) {
  let seq = 0;
  const owner = (name) => `${name}-${++seq}`;

  /** Resolves once `store`'s grant channel (`prefix`) is subscribed on some node. */
  async function listening(prefix) {
    await pollUntil(`the grant channel of a store with prefix ${prefix}`, async () => {
      for (const port of ports()) if ((await call(port, ['PUBSUB', 'CHANNELS', `${prefix}:grants:*`])).length > 0) return true;
      return false;
    }, BOUND);
  }

  /**
   * A store whose grants are recorded: `grants` in arrival order; `claim(owner)` false to
   * leave one unclaimed. Its prefix is the test's own: its grant channel is the only one.
   */
  async function waitingStore(key, prefix, claim = () => true) {
    const store = await open(prefix);
    const grants = [];
    store.subscribe(key, (grant) => {
      if (grant === undefined) return false;
      grants.push(grant);
      return claim(grant.owner);
    });
    await listening(prefix);
    const grantFor = (o) => pollUntil(`a grant to ${o}`, () => grants.find((g) => g.owner === o), BOUND);
    return { store, grants, grantFor };
  }

  test('weights are summed within the limit; a release makes room; tokens rise', async () => {
    const store = await open('p');
    const key = uniqueKey('sum');
    const a = owner('a');
    const b = owner('b');
    const c = owner('c');
    const ta = await store.acquire(key, a, TTL, permit(5, 2));
    const tb = await store.acquire(key, b, TTL, permit(5, 2));
    assert.ok(ta && tb, 'two holders of 2 of 5');
    assert.equal(await store.acquire(key, owner('x'), TTL, permit(5, 2)), undefined, '2 more do not fit in 5 with 4 held');
    const tc = await store.acquire(key, c, TTL, permit(5, 1));
    assert.ok(tc, 'the last permit fits');
    assert.equal(await store.acquire(key, owner('x'), TTL, permit(5, 1)), undefined, 'all 5 held');
    // An owner holds one permit at most: asking again (as an engine whose grant message
    // was lost) answers the permit it holds, not a new one.
    assert.deepEqual(await store.acquire(key, a, TTL, permit(5, 1)), ta, "an owner's second try answers its permit");
    assert.deepEqual((await store.inspect(key)).holders.map((h) => h.weight), [2, 2, 1]);
    assert.equal(await store.release(key, a), true);
    const d = owner('d');
    const td = await store.acquire(key, d, TTL, permit(5, 2));
    assert.ok(td, 'the 2 released permits are free again');
    const tokens = [ta, tb, tc, td].map((t) => t.fencingToken);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens rise: ${tokens.join(', ')}`);
    for (const o of [b, c, d]) assert.equal(await store.release(key, o), true);
    assert.equal(await store.isLocked(key), false, 'the key is gone once its last holder released');
    // The key's one counter serves plain leases after permits too.
    const plain = await store.acquire(key, owner('plain'), TTL);
    assert.ok(plain.fencingToken > td.fencingToken, 'a plain lease after permits gets a larger token');
  });

  test('readers hold together, a writer alone; a queued writer is not overtaken by later readers', async () => {
    const key = uniqueKey('rw');
    const prefix = uniqueKey('p');
    const store = await open(prefix);
    const { store: waiting, grants, grantFor } = await waitingStore(key, prefix);
    const readers = [owner('r'), owner('r'), owner('r')];
    const tokens = [];
    for (const r of readers) tokens.push((await store.acquire(key, r, TTL, permit(SHARED, 1))).fencingToken);
    const writer = owner('writer');
    assert.equal(await waiting.acquire(key, writer, TTL, permit(SHARED, SHARED, true)), undefined, 'a writer waits for the readers');
    const late = owner('late-reader');
    assert.equal(await waiting.acquire(key, late, TTL, permit(SHARED, 1, true)), undefined, 'a later reader does not overtake the queued writer');
    assert.equal(await store.acquire(key, owner('r'), TTL, permit(SHARED, 1)), undefined, 'nor does an unqueued one');
    await store.release(key, readers[0]);
    await store.release(key, readers[1]);
    await sleep(20);
    assert.deepEqual(grants, [], 'no grant while a reader holds');
    await store.release(key, readers[2]);
    const w = await grantFor(writer);
    assert.ok(w.fencingToken > Math.max(...tokens), "the writer's token is above every reader's before it");
    assert.equal(await store.acquire(key, owner('r'), TTL, permit(SHARED, 1)), undefined, 'no reader beside the writer');
    assert.equal(await waiting.release(key, writer), true);
    const r = await grantFor(late);
    assert.ok(r.fencingToken > w.fencingToken, 'the later reader goes in after the writer');
    assert.deepEqual(grants.map((g) => g.owner), [writer, late], 'grants in queue order');
    const inspected = await store.inspect(key);
    assert.equal(inspected.limit, SHARED);
    assert.deepEqual(inspected.holders.map((h) => [h.owner, h.weight, h.mode]), [[late, 1, 'shared']]);
    await waiting.release(key, late);
  });

  test('FIFO: a heavy head is not overtaken; permits are handed on from the head while each fits', async () => {
    const key = uniqueKey('fifo');
    const prefix = uniqueKey('p');
    const store = await open(prefix);
    const { store: waiting, grants, grantFor } = await waitingStore(key, prefix);
    const held = [owner('h'), owner('h'), owner('h')];
    for (const h of held) assert.ok(await store.acquire(key, h, TTL, permit(4, 1)));
    const head = owner('head');
    const [first, unqueued, last] = [owner('first'), owner('unqueued'), owner('last')];
    assert.equal(await waiting.acquire(key, head, TTL, permit(4, 3, true)), undefined, '3 do not fit beside 3 of 4');
    assert.equal(await waiting.acquire(key, first, TTL, permit(4, 1, true)), undefined, 'a later try that fits waits behind the head');
    assert.equal(await store.acquire(key, unqueued, TTL, permit(4, 1)), undefined);
    assert.equal(await waiting.acquire(key, last, TTL, permit(4, 1, true)), undefined);
    const seen = await store.inspect(key);
    assert.deepEqual(seen.waiters.map((w) => w.owner), [head, first, last], 'queued in arrival order, the unqueued try not');
    await store.release(key, held[0]);
    assert.equal(await waiting.acquire(key, first, TTL, permit(4, 1, true)), undefined, 'room for 1, but the head comes first');
    await sleep(20);
    assert.deepEqual(grants, [], 'nothing handed on while the head does not fit');
    await store.release(key, held[1]);
    const h = await grantFor(head);
    assert.equal(grants.length, 1, 'the head alone fits');
    assert.equal(await waiting.release(key, head), true);
    const g1 = await grantFor(first);
    const g2 = await grantFor(last);
    assert.ok(h.fencingToken < g1.fencingToken && g1.fencingToken < g2.fencingToken, 'tokens rise in grant order');
    assert.deepEqual(grants.map((g) => g.owner), [head, first, last]);
    assert.deepEqual((await store.inspect(key)).holders.map((x) => [x.owner, x.weight]), [[held[2], 1], [first, 1], [last, 1]]);
    for (const o of [first, last]) await waiting.release(key, o);
    await store.release(key, held[2]);
  });

  test('a head that gives up (a release, or a last try that does not queue) lets the owners behind it in', async () => {
    const key = uniqueKey('give-up');
    const prefix = uniqueKey('p');
    const store = await open(prefix);
    const { store: waiting, grants, grantFor } = await waitingStore(key, prefix);
    const holder = owner('holder');
    await store.acquire(key, holder, TTL, permit(4, 2));
    const [head, second, behind] = [owner('head'), owner('second'), owner('behind')];
    assert.equal(await waiting.acquire(key, head, TTL, permit(4, 3, true)), undefined);
    assert.equal(await waiting.acquire(key, second, TTL, permit(4, 4, true)), undefined);
    assert.equal(await waiting.acquire(key, behind, TTL, permit(4, 1, true)), undefined);
    assert.equal(await waiting.release(key, head), false, 'a waiter holds nothing to release');
    await sleep(20);
    assert.deepEqual(grants, [], 'the next head (4 of 4) does not fit beside 2 either');
    // The last try at a waiter's deadline does not queue: its owner leaves the queue.
    assert.equal(await waiting.acquire(key, second, TTL, permit(4, 4)), undefined);
    const g = await grantFor(behind);
    assert.ok(g.fencingToken > 0);
    assert.deepEqual((await store.inspect(key)).waiters, [], 'nobody left in the queue');
    await store.release(key, holder);
    await waiting.release(key, behind);
  });

  test('a grant nobody claims passes on to the next waiter', async () => {
    const key = uniqueKey('unclaimed');
    const prefix = uniqueKey('p');
    const store = await open(prefix);
    const gone = owner('gone');
    const { store: waiting, grantFor } = await waitingStore(key, prefix, (o) => o !== gone);
    const holder = owner('holder');
    await store.acquire(key, holder, TTL, permit(2, 2));
    const next = owner('next');
    assert.equal(await waiting.acquire(key, gone, TTL, permit(2, 2, true)), undefined);
    assert.equal(await waiting.acquire(key, next, TTL, permit(2, 1, true)), undefined);
    await store.release(key, holder);
    await grantFor(next);
    assert.equal(await store.renew(key, gone, TTL), false, 'the unclaimed grant was released');
    assert.equal(await waiting.release(key, next), true);
  });

  test('limits agree: { limit } both ways, plain against permits and 3 against 4', async () => {
    const store = await open('p');
    const cases = [
      [3, undefined],
      [3, 4],
      [4, 3],
      [undefined, 3],
    ];
    for (const [held, asked] of cases) {
      const key = uniqueKey('mismatch');
      const holder = owner('holder');
      const late = owner('late');
      assert.ok(await store.acquire(key, holder, TTL, held && permit(held, 1)));
      for (const queue of [false, true]) {
        const answer = await store.acquire(key, late, TTL, asked ? permit(asked, 1, queue) : { queue });
        assert.deepEqual(answer, { limit: held ?? 1 }, `limit ${asked ?? 'plain'} on a key held with ${held ?? 'a plain lease'}`);
      }
      assert.deepEqual((await store.inspect(key)).waiters, [], 'a { limit } answer queues nothing');
      assert.equal(await store.renew(key, holder, TTL), true, 'the holder keeps its lease');
      assert.equal(await store.release(key, holder), true);
      assert.ok((await store.acquire(key, late, TTL, asked && permit(asked, 1)))?.fencingToken, 'a free key takes any limit');
      await store.release(key, late);
    }
  });

  test("renew and release act on their owner's permit alone; an expired holder's permits return", async () => {
    const store = await open('p');
    const key = uniqueKey('own');
    const [a, b, c] = [owner('a'), owner('b'), owner('c')];
    const ta = await store.acquire(key, a, 200, permit(3, 2));
    await store.acquire(key, b, TTL, permit(3, 1));
    assert.equal(await store.renew(key, c, TTL), false, 'no permit, no renewal');
    assert.equal(await store.release(key, c), false, 'no permit, no release');
    assert.equal(await store.renew(key, b, TTL), true);
    assert.equal(await store.acquire(key, c, TTL, permit(3, 2)), undefined);
    const tc = await pollUntil("a's 2 permits after its 200 ms lapsed", () => store.acquire(key, c, TTL, permit(3, 2)), BOUND);
    assert.ok(tc.fencingToken > ta.fencingToken);
    assert.equal(await store.renew(key, a, TTL), false, 'a lapsed permit is not renewed');
    assert.equal(await store.release(key, a), false, 'nor released');
    assert.equal(await store.renew(key, b, TTL), true, "another holder's lapse leaves b's permit");
    assert.equal(await store.release(key, b), true);
    assert.equal(await store.release(key, b), false, 'a permit is released once');
    const ttl = await store.ttl(key);
    assert.ok(ttl > 0 && ttl <= TTL, `the key lives as long as its last holder (${ttl} ms)`);
    assert.equal(await store.release(key, c), true);
    assert.equal(await store.isLocked(key), false);
  });

  test('a lapse noticed by a try hands permits to the queued head first', async () => {
    const key = uniqueKey('lapse');
    const prefix = uniqueKey('p');
    const store = await open(prefix);
    const { store: waiting, grantFor } = await waitingStore(key, prefix);
    const dead = owner('dead');
    const td = await store.acquire(key, dead, 150, permit(3, 3));
    const head = owner('head');
    assert.equal(await waiting.acquire(key, head, TTL, permit(3, 2, true)), undefined);
    await sleep(200);
    const x = owner('x');
    const tx = await store.acquire(key, x, TTL, permit(3, 1));
    const g = await grantFor(head);
    assert.ok(td.fencingToken < g.fencingToken && g.fencingToken < tx.fencingToken, 'the head was granted before the try that noticed the lapse');
    await waiting.release(key, head);
    await store.release(key, x);
  });

  test('inspect shows each holder with its weight, the limit and the waiters; plain keys as before', async () => {
    const key = uniqueKey('inspect');
    const prefix = uniqueKey('p');
    const store = await open(prefix);
    const { store: waiting } = await waitingStore(key, prefix);
    const [a, b, w] = [owner('a'), owner('b'), owner('w')];
    const ta = await store.acquire(key, a, TTL, permit(3, 2));
    const tb = await store.acquire(key, b, TTL, permit(3, 1));
    await waiting.acquire(key, w, TTL, permit(3, 1, true));
    const seen = await store.inspect(key);
    assert.equal(seen.limit, 3);
    assert.deepEqual(seen.holders.map((h) => [h.owner, h.fencingToken, h.weight, h.mode]), [[a, ta.fencingToken, 2, undefined], [b, tb.fencingToken, 1, undefined]]);
    for (const h of seen.holders) assert.ok(h.ttl > 0 && h.ttl <= TTL);
    assert.deepEqual(seen.waiters.map((x) => x.owner), [w]);
    const keys = [];
    for await (const k of store.list({ prefix: key })) keys.push(k);
    assert.deepEqual(keys, [key], 'list finds a key held with permits');
    for (const o of [a, b]) await store.release(key, o);
    await waiting.release(key, w);
    const plainKey = uniqueKey('inspect-plain');
    await store.acquire(plainKey, a, TTL);
    const plain = await store.inspect(plainKey);
    assert.equal('limit' in plain, false);
    assert.deepEqual(Object.keys(plain.holders[0]).sort(), ['fencingToken', 'owner', 'ttl']);
  });

  test('bad options are refused with a TypeError or RangeError, granting nothing', async () => {
    const store = await open('p');
    const key = uniqueKey('bad');
    for (const options of [
      { limit: 0, weight: 1 },
      { limit: 3, weight: 4 },
      { limit: 3, weight: 0 },
      { limit: 2.5, weight: 1 },
      { limit: '3', weight: 1 },
      { limit: SHARED + 1, weight: 1 },
      { limit: 3 },
      { weight: 1 },
      { queue: 'yes', limit: 3, weight: 1 },
    ]) {
      await assert.rejects(store.acquire(key, 'o', TTL, options), (e) => e instanceof TypeError || e instanceof RangeError, JSON.stringify(options));
    }
    assert.equal(await store.isLocked(key), false);
    assert.equal(store.permits, true);
  });
}

/** `open(prefix)` for every client library on `connect()`'s servers; clients and stores closed after. */
function suite(title, connectAll, ports) {
  for (const kind of CLIENTS) {
    describe(`${title} through ${kind.name}`, () => {
      const opened = [];
      after(async () => {
        for (const { store, client } of opened) {
          await store.close();
          kind.close(client);
        }
      });
      cases(async (prefix) => {
        const client = await connectAll(kind);
        const store = new RedisLockStore({ client, prefix });
        opened.push({ store, client });
        return store;
      }, ports);
    });
  }
}

let server;
let cluster;
before(async () => {
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
});
after(async () => {
  await Promise.all([server?.stop(), cluster?.stop()]);
});

describe('standalone Redis', () => {
  suite('standalone', (kind) => kind.connect(server.port), () => [server.port]);
});
describe('Redis Cluster, 3 masters', () => {
  suite('cluster', (kind) => kind.connectCluster(cluster.nodes), () => cluster.ports);
});

describe('minReplicas', () => {
  let replica;
  before(async () => {
    // Redis 7 waits 5 s before a diskless full sync, for more replicas to join.
    await call(server.port, ['CONFIG', 'SET', 'repl-diskless-sync-delay', '0']);
    replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(server.port)] });
    await pollUntil('the replica in sync', async () => /master_link_status:up/.test(await call(replica.port, ['INFO', 'replication'])), {
      timeoutMs: 20_000,
      intervalMs: 20,
    });
  });
  after(() => replica?.stop());
  for (const kind of CLIENTS) {
    test(`${kind.name}: permits count once a replica holds them; without enough replicas the grant is undone`, async () => {
      const client = await kind.connect(server.port);
      try {
        const key = uniqueKey('replicated');
        const store = new RedisLockStore({ client, prefix: 'replicas', minReplicas: 1, replicaTimeout: 2000 });
        const a = await store.acquire(key, 'a', TTL, permit(3, 2));
        assert.ok(a.fencingToken > 0);
        assert.equal(await store.renew(key, 'a', TTL), true);
        const seen = await call(replica.port, ['HGET', `replicas:{${key}}`, 'a']);
        assert.match(seen, / 2 \d+$/, 'the replica holds the permit');
        assert.equal(await store.release(key, 'a'), true);
        const strict = new RedisLockStore({ client, prefix: 'replicas', minReplicas: 2, replicaTimeout: 50 });
        await assert.rejects(strict.acquire(key, 'b', TTL, permit(3, 1)), { code: 'REPLICAS_NOT_ACKNOWLEDGED' });
        assert.equal(await store.isLocked(key), false, 'the unacknowledged permit was given back');
      } finally {
        kind.close(client);
      }
    });
  }
});
