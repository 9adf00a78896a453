// EtcdLockStore's `inspect` and `list` against a real etcd member: a held key with two
// queued waiters read exactly (the holder's create revision as its token, whole
// seconds left, waiters in create-revision order), a missing key, a lease that ran
// out, and `list` by prefix and limit across pages, keys with '/' and '%' included.
// Run: node --test js-tests/etcd-inspect.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { EtcdLockStore } from 'leasehold/etcd';
import { startEtcdCluster } from './support/etcd.mjs';
import { checkHeldWithTwoWaiters, holdWithWaiters } from './support/inspect-scenario.mjs';
import { noUnhandledRejections, pollUntil } from './support/async.mjs';
import { uniqueKey } from './support/keys.mjs';

noUnhandledRejections(before, after);

let etcd;
const clients = [];
const stores = [];

function newStore(options = {}) {
  const client = new Etcd3({ hosts: etcd.endpoints });
  clients.push(client);
  const store = new EtcdLockStore({ client: options.namespace ? client.namespace(options.namespace) : client, ...(options.prefix ? { prefix: options.prefix } : {}) });
  stores.push(store);
  return store;
}

before(async () => {
  etcd = await startEtcdCluster(1);
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const c of clients) c.close();
  await etcd?.stop();
});

async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

test('a held key with two waiters: holder, token, time left, waiters in queue order', async () => {
  const [a, b, c] = [newStore(), newStore(), newStore()];
  const key = uniqueKey('etcd/held%');
  const scenario = await holdWithWaiters({ holderStore: a, waiterStores: [b, c], key, inspect: () => a.inspect(key) });
  const inspection = await a.inspect(key);
  assert.equal(inspection.key, key);
  assert.equal(inspection.holders[0].ttl % 1000, 0, 'etcd counts whole seconds');
  for (const w of inspection.waiters) assert.deepEqual(Object.keys(w), ['owner'], 'etcd keeps no time: no since');
  await checkHeldWithTwoWaiters(scenario, inspection);
  assert.equal(await a.inspect(key), undefined);
});

test('a missing key, and a lease that ran out', async () => {
  const store = newStore();
  assert.equal(await store.inspect(uniqueKey('never')), undefined);
  const key = uniqueKey('etcd-expiring');
  // The lease of a holder that stops renewing: etcd deletes its key when it runs out.
  assert.ok(await store.acquire(key, 'short-lived', 1));
  assert.equal((await store.inspect(key)).holders[0].owner, 'short-lived');
  await pollUntil('the lease to run out', async () => (await store.inspect(key)) === undefined, { timeoutMs: 10_000, intervalMs: 100 });
  assert.deepEqual(await collect(store.list({ prefix: key })), []);
});

test('list: held keys by prefix and limit, page after page, in a namespace', async () => {
  const store = newStore({ namespace: 'app/', prefix: 'locks' });
  const other = newStore({ prefix: 'locks' });
  const base = uniqueKey('lst');
  const keys = Array.from({ length: 520 }, (_, i) => `${base}/${String(i).padStart(3, '0')}`);
  await Promise.all(keys.map((k) => store.acquire(k, 'o', 30_000)));
  assert.ok(await store.acquire(`${base}%x`, 'o', 30_000));
  const waiter = newStore({ namespace: 'app/', prefix: 'locks' });
  // A waiter's key under a held lock: the lock is listed once.
  const waiting = waiter.acquire(keys[0], 'queued', 30_000, { queue: true });
  assert.equal(await waiting, undefined);
  assert.deepEqual(await collect(store.list({ prefix: `${base}/` })), keys);
  // In the order of the names etcd keeps ('%' written '%25', '/' '%2F').
  assert.deepEqual(await collect(store.list({ prefix: base, limit: 3 })), [`${base}%x`, ...keys.slice(0, 2)]);
  assert.deepEqual(await collect(other.list({ prefix: base })), [], 'another namespace');
  assert.equal((await collect(store.list())).length, 521);
  assert.throws(() => store.list({ prefix: 7 }), TypeError);
  await assert.rejects(store.inspect(''), TypeError);
});
