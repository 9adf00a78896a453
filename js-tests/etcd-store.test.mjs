// EtcdLockStore against a real single-member etcd (support/etcd.mjs), through the
// `etcd3` client, and through the real engine: the store contract, tokens that are
// create revisions, waiting in create-revision order by watch (FIFO across stores and
// processes, no polling), grants nobody claims, close(), processes that die or exit.
// Nothing is mocked; every wait is bounded. Run: node --test js-tests/etcd-store.test.mjs
// (LEASEHOLD_ENGINE=wasm runs it on the wasm engine.)

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { ResiliencePipelineBuilder, LockNotAcquiredError, acquireLock, getLockToken } from 'leasehold';
import { EtcdLockStore } from 'leasehold/etcd';
import { startEtcdCluster } from './support/etcd.mjs';
import { within } from './support/async.mjs';
import { startFleetWorker } from './support/fleet.mjs';
import { uniqueKey } from './support/keys.mjs';

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

const WORKER = fileURLToPath(new URL('./support/etcd-worker.mjs', import.meta.url));

let etcd;
const clients = [];
const stores = [];

/** A client of its own (its own connection), closed at the end. */
function newClient() {
  const client = new Etcd3({ hosts: etcd.endpoints });
  clients.push(client);
  return client;
}

function newStore(options = {}) {
  const store = new EtcdLockStore({ client: options.client ?? newClient(), ...options });
  stores.push(store);
  return store;
}

/** A client whose KV calls (txn, range) are counted, sharing `client`'s connections. */
function counting(client) {
  const counts = { txn: 0, range: 0 };
  const kv = {
    txn: (req, o) => {
      counts.txn += 1;
      return client.kv.txn(req, o);
    },
    range: (req, o) => {
      counts.range += 1;
      return client.kv.range(req, o);
    },
  };
  const wrapped = Object.create(client, { kv: { value: kv } });
  return { client: wrapped, counts };
}

async function keysUnder(client, key, prefix = 'leasehold') {
  const all = await client.getAll().prefix(`${prefix}/${key}/`).sort('Create', 'Ascend').exec();
  return all.kvs.map((kv) => ({ key: kv.key.toString(), owner: kv.value.toString(), create: Number(kv.create_revision), lease: kv.lease }));
}

const lock = (options) => new ResiliencePipelineBuilder().addLock(options).build();

before(async () => {
  etcd = await startEtcdCluster(1);
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const c of clients) c.close();
  await etcd?.stop();
  assert.deepEqual(unhandled, []);
});

describe('options and arguments', () => {
  test("require('leasehold/etcd') and import give one class", () => {
    assert.equal(createRequire(import.meta.url)('leasehold/etcd').EtcdLockStore, EtcdLockStore);
  });

  test('the constructor names what is wrong', () => {
    assert.throws(() => new EtcdLockStore(), /options must be an object with a client, got undefined/);
    assert.throws(() => new EtcdLockStore({}), /client must be an Etcd3 client .*got undefined/);
    assert.throws(() => new EtcdLockStore({ client: { kv: {} } }), TypeError);
    const client = newClient();
    assert.throws(() => new EtcdLockStore({ client, prefx: 'x' }), /EtcdLockStore has no option "prefx"; its options are client, prefix/);
    assert.throws(() => new EtcdLockStore({ client, prefix: '' }), /prefix must be a non-empty string, got ""/);
    assert.throws(() => new EtcdLockStore({ client, prefix: 'a\uD800' }), /prefix must be well-formed UTF-16/);
    const store = new EtcdLockStore({ client, prefix: 'p' });
    assert.equal(store.prefix, 'p');
    assert.equal(store.grantsOnRelease, true);
  });

  test('methods refuse bad arguments before any request', async () => {
    const store = newStore();
    await assert.rejects(store.acquire('', 'o', 1000), /key must be a non-empty string, got ""/);
    await assert.rejects(store.acquire('k', 42, 1000), /owner must be a non-empty string, got 42/);
    await assert.rejects(store.acquire('k', 'o', 0), RangeError);
    await assert.rejects(store.acquire('k', 'o', 1.5), /ttlMs must be a positive integer number of milliseconds, got 1.5/);
    await assert.rejects(store.acquire('k', 'o', '1000'), TypeError);
    await assert.rejects(store.acquire('k', 'o', 1000, 'queue'), /options must be an object like \{ queue: true \}, got "queue"/);
    await assert.rejects(store.acquire('k', 'o', 1000, { queue: 1 }), TypeError); // a queue that is no boolean
    await assert.rejects(store.renew('k', 'o', -1), RangeError);
    await assert.rejects(store.release('k\uDC00', 'o'), /key must be well-formed UTF-16/);
    await assert.rejects(store.isLocked(undefined), TypeError);
    assert.throws(() => store.subscribe('k', 'not a function'), /onReleased must be a function, got "not a function"/);
  });
});

describe('the store contract', () => {
  test('the fencing token is the create revision of the holder key', async () => {
    const client = newClient();
    const store = newStore({ client });
    const key = uniqueKey('token');
    const a = await store.acquire(key, 'A', 2000);
    const [mine] = await keysUnder(client, key);
    assert.deepEqual(a, { fencingToken: mine.create });
    assert.equal(mine.owner, 'A');
    assert.equal(await store.acquire(key, 'B', 2000), undefined, 'held');
    assert.equal((await keysUnder(client, key)).length, 1, 'a try that does not wait leaves nothing behind');
    assert.equal(await store.isLocked(key), true);
    assert.ok((await store.ttl(key)) > 0);
    assert.equal(await store.release(key, 'B'), false, 'not B\'s');
    assert.equal(await store.renew(key, 'B', 2000), false);
    assert.equal(await store.renew(key, 'A', 2000), true);
    assert.equal(await store.release(key, 'A'), true);
    assert.equal(await store.release(key, 'A'), false, 'released already');
    assert.equal(await store.isLocked(key), false);
    assert.equal(await store.ttl(key), undefined);
    const b = await store.acquire(key, 'B', 2000);
    assert.ok(b.fencingToken > a.fencingToken);
    // Another store (another client) releases B's lease: owner-checked, by value.
    assert.equal(await newStore().release(key, 'A'), false);
    assert.equal(await newStore().release(key, 'B'), true);
  });

  test('an expired lease is gone: renew and release answer false, the next token is larger', async () => {
    const store = newStore();
    const key = uniqueKey('expiry');
    const a = await store.acquire(key, 'A', 1000);
    await sleep(2600); // the lease: 1 s, or the server's minimum (0.75 s here): gone by now
    assert.equal(await store.renew(key, 'A', 1000), false);
    assert.equal(await store.release(key, 'A'), false);
    const b = await store.acquire(key, 'B', 1000);
    assert.ok(b.fencingToken > a.fencingToken);
    await store.release(key, 'B');
  });

  test('keys never share a prefix: / and % are escaped', async () => {
    const client = newClient();
    const store = newStore({ client });
    const k1 = `${uniqueKey('esc')}/a`;
    const k2 = k1.replace('/', '%2F');
    assert.ok(await store.acquire(k1, 'A', 2000));
    assert.ok(await store.acquire(k2, 'B', 2000), 'a different key');
    assert.ok(await store.acquire(`${k1}/b`, 'C', 2000), 'not under the first');
    for (const [k, o] of [[k1, 'A'], [k2, 'B'], [`${k1}/b`, 'C']]) assert.equal(await store.release(k, o), true);
  });

  test("a namespace's prefix comes first: a store on client.namespace('app/') shares locks with prefix 'app/leasehold'", async () => {
    const client = newClient();
    const inNamespace = newStore({ client: client.namespace('app/') });
    const plain = newStore({ client, prefix: 'app/leasehold' });
    const key = uniqueKey('ns');
    assert.ok(await inNamespace.acquire(key, 'A', 2000));
    assert.equal(await plain.acquire(key, 'B', 2000), undefined);
    assert.equal(await plain.release(key, 'A'), true);
  });

  test('an acquire applied twice (a client retry after a lost answer): the token is the key\'s create revision', async () => {
    const client = newClient();
    const twice = Object.create(client, {
      kv: {
        value: {
          txn: async (req) => {
            await client.kv.txn(req); // applied, its answer lost
            return client.kv.txn(req);
          },
          range: (req) => client.kv.range(req),
        },
      },
    });
    const store = newStore({ client: twice });
    const plain = newStore({ client });
    const key = uniqueKey('twice');
    const a = await store.acquire(key, 'A', 2000, { queue: true });
    assert.deepEqual((await keysUnder(client, key)).map((k) => [k.owner, k.create]), [['A', a.fencingToken]]);
    assert.equal(await plain.release(key, 'A'), true);
    // A try that does not wait: its second attempt finds its own key, first: held.
    const b = await store.acquire(key, 'B', 2000);
    assert.deepEqual((await keysUnder(client, key)).map((k) => [k.owner, k.create]), [['B', b.fencingToken]]);
    // Queued behind B, from a retried transaction: granted when B goes.
    const grants = [];
    store.subscribe(key, (g) => grants.push(g) > 0);
    assert.equal(await store.acquire(key, 'C', 2000, { queue: true }), undefined);
    const [, c] = await keysUnder(client, key);
    assert.equal(await plain.release(key, 'B'), true);
    await within(3000, 'the grant to C', (async () => { while (grants.length === 0) await sleep(5); })());
    assert.deepEqual(grants.map((g) => [g.owner, g.fencingToken]), [['C', c.create]]);
    assert.equal(await plain.release(key, 'C'), true);
    // Held by someone else: a try that does not wait, applied twice, leaves nothing.
    await plain.acquire(key, 'D', 2000);
    assert.equal(await store.acquire(key, 'E', 2000), undefined);
    assert.deepEqual((await keysUnder(client, key)).map((k) => k.owner), ['D']);
  });

  test('renew for a longer ttl than the lease was granted moves the key to a new lease; the token stays', async () => {
    const client = newClient();
    const store = newStore({ client });
    const key = uniqueKey('relet');
    const a = await store.acquire(key, 'A', 1000);
    const [before] = await keysUnder(client, key);
    assert.equal(await store.renew(key, 'A', 5000), true);
    const [now] = await keysUnder(client, key);
    assert.equal(now.create, a.fencingToken);
    assert.notEqual(now.lease, before.lease);
    await sleep(2000); // past the old lease
    assert.equal(await store.renew(key, 'A', 5000), true);
    assert.equal(await store.release(key, 'A'), true);
  });
});

describe('waiting by watch', () => {
  test('queued owners are granted in create-revision order across stores, each told by its own store', async () => {
    const holder = newStore();
    const key = uniqueKey('fifo');
    const grants = [];
    const waiters = [newStore(), newStore(), newStore()];
    for (const [i, s] of waiters.entries()) {
      s.subscribe(key, (g) => {
        grants.push({ store: i, ...g });
        return true;
      });
    }
    const first = await holder.acquire(key, 'H', 3000);
    for (const [i, s] of waiters.entries()) assert.equal(await s.acquire(key, `W${i}`, 3000, { queue: true }), undefined);
    assert.equal(await waiters[0].acquire(key, 'W0', 3000, { queue: true }), undefined, 'asked again: still waiting');
    await holder.release(key, 'H');
    for (let i = 0; i < 3; i++) {
      await within(3000, `grant ${i}`, (async () => { while (grants.length <= i) await sleep(5); })());
      assert.equal(grants[i].owner, `W${i}`);
      assert.equal(grants[i].store, i);
      assert.ok(grants[i].fencingToken > (i === 0 ? first.fencingToken : grants[i - 1].fencingToken));
      assert.ok(grants[i].age >= 0 && grants[i].age < 3000);
      // Asked again once handed over: the same lease.
      assert.deepEqual(await waiters[i].acquire(key, `W${i}`, 3000, { queue: true }), { fencingToken: grants[i].fencingToken });
      await sleep(50);
      assert.equal(grants.length, i + 1, 'no one else is granted while it holds');
      assert.equal(await waiters[i].release(key, `W${i}`), true);
    }
  });

  test('a grant nobody claims is released at once, and the next waiter gets the lock', async () => {
    const key = uniqueKey('unclaimed');
    const holder = newStore();
    const refusing = newStore();
    const taking = newStore();
    refusing.subscribe(key, () => false);
    const grants = [];
    taking.subscribe(key, (g) => grants.push(g) > 0);
    await holder.acquire(key, 'H', 3000);
    await refusing.acquire(key, 'R', 3000, { queue: true });
    await taking.acquire(key, 'T', 3000, { queue: true });
    await holder.release(key, 'H');
    await within(3000, 'the grant to T', (async () => { while (grants.length === 0) await sleep(5); })());
    assert.equal(grants[0].owner, 'T');
    assert.equal(await taking.release(key, 'T'), true);
  });

  test('a waiter that stops waiting (a last try without queue) leaves the queue', async () => {
    const client = newClient();
    const key = uniqueKey('leave');
    const holder = newStore({ client });
    const waiter = newStore();
    await holder.acquire(key, 'H', 3000);
    await waiter.acquire(key, 'W', 3000, { queue: true });
    assert.equal((await keysUnder(client, key)).length, 2);
    assert.equal(await waiter.acquire(key, 'W', 3000), undefined);
    assert.deepEqual((await keysUnder(client, key)).map((k) => k.owner), ['H']);
    await holder.release(key, 'H');
  });

  test('a waiter aborted while another of its store waits: the engine releases it, its key goes, the other is served', async () => {
    const client = newClient();
    const key = uniqueKey('aborted');
    const holder = newStore({ client });
    const waiters = newStore();
    const a = await acquireLock(holder, key, 5000, { autoRenew: true });
    const controller = new AbortController();
    const w1 = acquireLock(waiters, key, 5000, { wait: '30s', signal: controller.signal });
    const w2 = acquireLock(waiters, key, 5000, { wait: '30s' });
    const owners = async () => (await keysUnder(client, key)).map((k) => k.owner);
    await within(5000, 'W1 and W2 queued', (async () => { while ((await owners()).length < 3) await sleep(10); })());
    const [hOwner] = await owners();
    controller.abort();
    await assert.rejects(w1, { name: 'AbortError' });
    // W2 still waits, so the engine keeps listening: only its release of W1 deletes W1's key.
    await within(3000, "W1's key deleted", (async () => { while ((await owners()).length > 2) await sleep(10); })());
    const [first, w2Owner] = await owners();
    assert.equal(first, hOwner, 'H still holds the key');
    assert.equal(await a.release(), true);
    const lease = await within(3000, 'W2 is granted the key', w2);
    assert.ok(lease.fencingToken > a.fencingToken);
    assert.deepEqual(await owners(), [w2Owner]);
    assert.equal(await lease.release(), true);
  });

  test('close() takes the store\'s waiters out of the queue; the next store\'s waiter is served', async () => {
    const client = newClient();
    const key = uniqueKey('close');
    const holder = newStore({ client });
    const closing = newStore();
    const next = newStore();
    const grants = [];
    next.subscribe(key, (g) => grants.push(g) > 0);
    closing.subscribe(key, () => assert.fail('a closed store grants nothing'));
    await holder.acquire(key, 'H', 3000);
    await closing.acquire(key, 'C', 3000, { queue: true });
    await next.acquire(key, 'N', 3000, { queue: true });
    await closing.close();
    assert.deepEqual((await keysUnder(client, key)).map((k) => k.owner), ['H', 'N']);
    assert.equal(closing.subscribe(key, () => true).call(), undefined, 'subscribe after close is a no-op');
    await holder.release(key, 'H');
    await within(3000, 'the grant to N', (async () => { while (grants.length === 0) await sleep(5); })());
    assert.equal(grants[0].owner, 'N');
    await next.release(key, 'N');
  });

  test('the engine: executions on two stores take turns, no overlap, tokens rise in grant order, no polling', async () => {
    const key = uniqueKey('engine');
    const watched = counting(newClient());
    const stores2 = [newStore({ client: watched.client }), newStore()];
    const pipelines = stores2.map((store) => lock({ key, store, ttl: '3s', wait: '20s' }));
    let inside = 0;
    const tokens = [];
    const run = (p) =>
      p.execute(async () => {
        inside += 1;
        assert.equal(inside, 1, 'one holder at a time');
        tokens.push(getLockToken());
        await sleep(20);
        inside -= 1;
      });
    await Promise.all(Array.from({ length: 12 }, (_, i) => run(pipelines[i % 2])));
    assert.equal(tokens.length, 12);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${i} rises`);

    // A waiter that waits 2.5 s while another holds: its store sends no request meanwhile.
    const held = await acquireLock(stores2[1], key, 3000, { wait: 0 });
    const waiting = acquireLock(stores2[0], key, 3000, { wait: 10_000 });
    await sleep(300);
    const before = { ...watched.counts };
    await sleep(2500);
    assert.deepEqual(watched.counts, before, 'no txn or range while waiting');
    const releasedAt = performance.now();
    await held.release();
    const got = await within(2000, 'the waiter', waiting);
    assert.ok(performance.now() - releasedAt < 500, 'woken by the watch, not a poll');
    assert.ok(got.fencingToken > held.fencingToken);
    await got.release();
  });

  test('fail fast on a held key: LockNotAcquiredError; wait: the lock when it is released', async () => {
    const key = uniqueKey('failfast');
    const store = newStore();
    const other = newStore();
    const held = await acquireLock(store, key, 3000);
    await assert.rejects(lock({ key, store: other, ttl: '3s' }).execute(() => 1), LockNotAcquiredError);
    setTimeout(() => held.release(), 200);
    assert.equal(await lock({ key, store: other, ttl: '3s', wait: '5s' }).execute(() => 7), 7);
  });
});

describe('processes', () => {
  test('a holder process killed: its lease lapses on the server and the waiter gets the lock; a dead waiter is passed over', async () => {
    const key = uniqueKey('killed');
    const holder = startFleetWorker(WORKER, [etcd.endpoints.join(','), 'hold', key, '1000'], 'holder');
    holder.ready.catch(() => {}); // it prints no ready line, and dies
    const held = await within(10_000, 'the holder', holder.result);
    const deadWaiter = startFleetWorker(WORKER, [etcd.endpoints.join(','), 'wait', key, '1000'], 'dead waiter');
    deadWaiter.result.catch(() => {}); // it dies before it reports
    await within(10_000, 'the dead waiter queued', deadWaiter.ready);
    const store = newStore();
    const waiting = acquireLock(store, key, 1000, { wait: 15_000 });
    await sleep(200);
    deadWaiter.child.kill('SIGKILL');
    const killedAt = performance.now();
    holder.child.kill('SIGKILL');
    const got = await within(8000, 'the lock after both died', waiting);
    // Within both leases' ttl (1 s, whole seconds, or the server's minimum) and a bit.
    assert.ok(performance.now() - killedAt < 4000);
    assert.ok(got.fencingToken > held.held);
    await got.release();
  });

  test('after client.close() nothing of the store keeps the process alive', async () => {
    const key = uniqueKey('exit');
    const busy = await acquireLock(newStore(), `${key}-busy`, 3000);
    const worker = startFleetWorker(WORKER, [etcd.endpoints.join(','), 'idle', key, '3000'], 'idle');
    await within(10_000, 'the worker ready', worker.ready);
    assert.deepEqual(await within(10_000, 'the worker done', worker.result), { done: true });
    assert.deepEqual(await within(5_000, 'the worker exited on its own', worker.exited), { code: 0, signal: null });
    await busy.release();
  });
});
