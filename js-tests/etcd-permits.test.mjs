// Permits on EtcdLockStore against a real single-member etcd (support/etcd.mjs), through
// the store's own calls: limits with weights summed, shared readers and a lone writer,
// FIFO behind a heavy head, limits that disagree, per-owner renew/release/lapse, rising
// tokens, who wakes on a release (no crowd), inspect, and options refused; then through
// the engine in child processes (support/etcd-permits-worker.mjs): a limit never
// exceeded, and a SIGKILLed holder's permits handed on. Every wait is bounded. Run: node --test js-tests/etcd-permits.test.mjs (LEASEHOLD_ENGINE=wasm too).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { LockLimitMismatchError, acquireLock, withLock } from 'leasehold';
import { EtcdLockStore } from 'leasehold/etcd';
import { startEtcdCluster } from './support/etcd.mjs';
import { within, pollUntil } from './support/async.mjs';
import { FLEET_DONE_MS, FLEET_READY_MS, startFleetWorker } from './support/fleet.mjs';
import { uniqueKey } from './support/keys.mjs';

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

const WORKER = fileURLToPath(new URL('./support/etcd-permits-worker.mjs', import.meta.url));
const SHARED_LIMIT = 2147483647;
const TTL = 5_000;

let etcd;
const clients = [];
const stores = [];
const workers = [];

/** A child process (support/etcd-permits-worker.mjs), killed at the end if still running. */
function startWorker(args, name) {
  const worker = startFleetWorker(WORKER, [etcd.endpoints.join(','), ...args], name);
  workers.push(worker);
  return worker;
}

function newStore(wrap = (client) => client) {
  const client = new Etcd3({ hosts: etcd.endpoints });
  clients.push(client);
  const store = new EtcdLockStore({ client: wrap(client) });
  stores.push(store);
  return store;
}

/** A store whose KV reads (range) and transactions are counted. */
function countingStore() {
  const counts = { txn: 0, range: 0 };
  const store = newStore((client) => {
    const kv = {
      txn: (req, o) => ((counts.txn += 1), client.kv.txn(req, o)),
      range: (req, o) => ((counts.range += 1), client.kv.range(req, o)),
    };
    return Object.create(client, { kv: { value: kv } });
  });
  return { store, counts };
}

/** Claims every grant `store` is handed on `key`; `granted(owner)` resolves with it. */
function claim(store, key) {
  const got = [];
  const waiting = new Map();
  store.subscribe(key, (grant) => {
    got.push(grant);
    waiting.get(grant.owner)?.(grant);
    return true;
  });
  const granted = (owner) =>
    within(10_000, `the grant to ${owner}`, new Promise((resolve) => {
      const found = got.find((g) => g.owner === owner);
      if (found !== undefined) resolve(found);
      else waiting.set(owner, resolve);
    }));
  return { got, granted };
}

const permit = (limit, weight, queue = false) => ({ queue, limit, weight });

before(async () => {
  etcd = await startEtcdCluster(1);
});

after(async () => {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const c of clients) c.close();
  await etcd?.stop();
  assert.deepEqual(unhandled, []);
});

describe('options', () => {
  test('the store declares permits; bad options are refused, naming the field', async () => {
    const store = newStore();
    assert.equal(store.permits, true);
    await assert.rejects(store.acquire('k', 'o', TTL, { limit: 0, weight: 1 }), { name: 'RangeError', message: /options\.limit/ });
    await assert.rejects(store.acquire('k', 'o', TTL, { limit: 3, weight: 4 }), { name: 'RangeError', message: /options\.weight/ });
    await assert.rejects(store.acquire('k', 'o', TTL, { limit: 3 }), { name: 'RangeError', message: /options\.weight/ });
    await assert.rejects(store.acquire('k', 'o', TTL, { limit: 2.5, weight: 1 }), { name: 'RangeError', message: /options\.limit/ });
    await assert.rejects(store.acquire('k', 'o', TTL, { limit: SHARED_LIMIT + 1, weight: 1 }), RangeError);
    await assert.rejects(store.acquire('k', 'o', TTL, { queue: 'yes' }), TypeError);
  });
});

describe('limits and weights', () => {
  test('weights are summed against the limit; a release returns its weight', async () => {
    const key = uniqueKey('weights');
    const store = newStore();
    const a = await store.acquire(key, 'a', TTL, permit(5, 2));
    const b = await store.acquire(key, 'b', TTL, permit(5, 3));
    assert.ok(a.fencingToken > 0 && b.fencingToken > a.fencingToken);
    assert.equal(await store.acquire(key, 'c', TTL, permit(5, 1)), undefined); // 2 + 3 + 1 > 5
    assert.equal(await store.isLocked(key), true);
    assert.equal(await store.release(key, 'a'), true);
    const c = await store.acquire(key, 'c', TTL, permit(5, 2));
    assert.ok(c.fencingToken > b.fencingToken);
    assert.equal(await store.acquire(key, 'd', TTL, permit(5, 1)), undefined); // full again
    for (const owner of ['b', 'c']) assert.equal(await store.release(key, owner), true);
    assert.equal(await store.isLocked(key), false); // a refused try left nothing behind
  });

  test('readers hold together, a writer alone, and a waiting writer is not overtaken', async () => {
    const key = uniqueKey('modes');
    const store = newStore();
    const grants = claim(store, key);
    const read = (queue) => permit(SHARED_LIMIT, 1, queue);
    const write = (queue) => permit(SHARED_LIMIT, SHARED_LIMIT, queue);
    const r1 = await store.acquire(key, 'r1', TTL, read());
    const r2 = await store.acquire(key, 'r2', TTL, read());
    assert.ok(r1 && r2 && r2.fencingToken > r1.fencingToken);
    assert.equal(await store.acquire(key, 'w', TTL, write()), undefined);
    assert.equal(await store.acquire(key, 'w', TTL, write(true)), undefined); // queued
    // A reader after the queued writer waits behind it (FIFO: no writer starvation).
    assert.equal(await store.acquire(key, 'r3', TTL, read()), undefined);
    assert.equal(await store.acquire(key, 'r3', TTL, read(true)), undefined);
    assert.equal(await store.release(key, 'r1'), true);
    await sleep(100);
    assert.deepEqual(grants.got, []); // r2 still reads
    assert.equal(await store.release(key, 'r2'), true);
    const w = await grants.granted('w');
    assert.ok(w.fencingToken > r2.fencingToken);
    assert.deepEqual(await store.acquire(key, 'w', TTL, write(true)), { fencingToken: w.fencingToken });
    await sleep(100);
    assert.equal(grants.got.length, 1); // r3 waits for the writer
    assert.equal(await store.release(key, 'w'), true);
    const r3 = await grants.granted('r3');
    assert.ok(r3.fencingToken > w.fencingToken);
    assert.equal(await store.release(key, 'r3'), true);
  });

  test('FIFO: a heavy request at the head blocks lighter ones behind it, then all that fit go in', async () => {
    const key = uniqueKey('fifo');
    const holder = newStore();
    const waiters = [newStore(), newStore(), newStore()];
    const grants = waiters.map((s) => claim(s, key));
    const h1 = await holder.acquire(key, 'h1', TTL, permit(4, 2));
    const h2 = await holder.acquire(key, 'h2', TTL, permit(4, 1));
    assert.ok(h1 && h2);
    // 'heavy' (3) does not fit beside 3 taken; 'light' (1) would, but waits behind it.
    assert.equal(await waiters[0].acquire(key, 'heavy', TTL, permit(4, 3, true)), undefined);
    assert.equal(await waiters[1].acquire(key, 'light', TTL, permit(4, 1, true)), undefined);
    assert.equal(await waiters[2].acquire(key, 'last', TTL, permit(4, 1, true)), undefined);
    // A try that does not wait does not overtake them either.
    assert.equal(await holder.acquire(key, 'passer', TTL, permit(4, 1)), undefined);
    assert.equal(await holder.release(key, 'h2'), true);
    await sleep(150);
    assert.deepEqual(grants.flatMap((g) => g.got), []); // 2 + 3 > 4: the head still waits
    assert.equal(await holder.release(key, 'h1'), true);
    // 3 + 1 fit: heavy and light go in (light told by heavy's touch), last (3 + 1 + 1) waits.
    const heavy = await grants[0].granted('heavy');
    const light = await grants[1].granted('light');
    assert.ok(heavy.fencingToken > h2.fencingToken && light.fencingToken > heavy.fencingToken);
    await sleep(150);
    assert.deepEqual(grants[2].got, []);
    assert.equal(await waiters[0].release(key, 'heavy'), true);
    const last = await grants[2].granted('last');
    assert.ok(last.fencingToken > light.fencingToken);
    const inspected = await holder.inspect(key);
    assert.deepEqual(inspected.holders.map((h) => [h.owner, h.weight]), [['light', 1], ['last', 1]]);
    assert.equal(await waiters[1].release(key, 'light'), true);
    assert.equal(await waiters[2].release(key, 'last'), true);
  });

  test('a release wakes one waiter, not the queue (watches, no crowd)', async () => {
    const key = uniqueKey('herd');
    const holder = newStore();
    await holder.acquire(key, 'h1', TTL, permit(2, 1));
    await holder.acquire(key, 'h2', TTL, permit(2, 1));
    const head = countingStore();
    const behind = [countingStore(), countingStore(), countingStore()];
    const headGrants = claim(head.store, key);
    const behindGrants = behind.map((b) => claim(b.store, key));
    assert.equal(await head.store.acquire(key, 'head', TTL, permit(2, 2, true)), undefined);
    for (const [i, b] of behind.entries()) assert.equal(await b.store.acquire(key, `w${i}`, TTL, permit(2, 1, true)), undefined);
    const before = [head, ...behind].map((s) => s.counts.range);
    assert.equal(await holder.release(key, 'h1'), true);
    // Only the head reads its queue again; the others do not hear of it.
    await pollUntil('the head reading its queue', () => head.counts.range > before[0], { timeoutMs: 5_000, intervalMs: 20 });
    await sleep(100);
    assert.deepEqual(behind.map((b) => b.counts.range), before.slice(1));
    assert.equal(await holder.release(key, 'h2'), true);
    await headGrants.granted('head');
    // The head, let in, tells the one just behind it; the two after that hear nothing.
    await pollUntil('w0 reading its queue', () => behind[0].counts.range > before[1], { timeoutMs: 5_000, intervalMs: 20 });
    await sleep(100);
    assert.deepEqual(behind.slice(1).map((b) => b.counts.range), before.slice(2));
    assert.equal(await head.store.release(key, 'head'), true);
    // 1 + 1 fit: w0 and w1 go in, w2 waits.
    await behindGrants[0].granted('w0');
    await behindGrants[1].granted('w1');
    await sleep(100);
    assert.deepEqual(behindGrants[2].got, []);
    for (const [i, b] of behind.entries()) await b.store.release(key, `w${i}`);
  });
});

describe('limits that disagree', () => {
  test('a plain acquire on a key held with permits, and a permit on a plain one, answer the limit', async () => {
    const key = uniqueKey('plain-vs-permits');
    const store = newStore();
    const held = await store.acquire(key, 'p', TTL, permit(3, 1));
    assert.ok(held.fencingToken > 0);
    assert.deepEqual(await store.acquire(key, 'plain', TTL), { limit: 3 });
    assert.deepEqual(await store.acquire(key, 'plain', TTL, { queue: true }), { limit: 3 });
    assert.deepEqual(await store.acquire(key, 'four', TTL, permit(4, 1)), { limit: 3 });
    assert.deepEqual(await store.acquire(key, 'four', TTL, permit(4, 1, true)), { limit: 3 });
    assert.equal(await store.release(key, 'p'), true);
    assert.equal(await store.isLocked(key), false); // nothing of the refused ones was left

    const plain = await store.acquire(key, 'plain', TTL);
    assert.ok(plain.fencingToken > held.fencingToken);
    assert.deepEqual(await store.acquire(key, 'p', TTL, permit(3, 1)), { limit: 1 });
    assert.deepEqual(await store.acquire(key, 'p', TTL, permit(3, 1, true)), { limit: 1 });
    assert.equal(await store.release(key, 'plain'), true);
    // Free again: any limit may take the key.
    const four = await store.acquire(key, 'four', TTL, permit(4, 4));
    assert.ok(four.fencingToken > plain.fencingToken);
    assert.equal(await store.release(key, 'four'), true);
  });

  test('queued waiters keep the limit too; limit 1 with weight 1 is a plain lock', async () => {
    const key = uniqueKey('queued-limit');
    const store = newStore();
    claim(store, key);
    await store.acquire(key, 'h', TTL, permit(2, 2));
    assert.equal(await store.acquire(key, 'w', TTL, permit(2, 1, true)), undefined);
    assert.equal(await store.release(key, 'h'), true);
    // 'w' holds or is about to: its key keeps the limit.
    assert.deepEqual(await store.acquire(key, 'plain', TTL), { limit: 2 });
    await store.release(key, 'w');
    const one = await store.acquire(key, 'one', TTL, permit(1, 1));
    assert.deepEqual(await store.acquire(key, 'plain', TTL), undefined); // held, same limit
    assert.deepEqual(await store.acquire(key, 'p', TTL, permit(2, 1)), { limit: 1 });
    assert.ok(one.fencingToken > 0);
    await store.release(key, 'one');
  });
});

describe('each holder its own lease', () => {
  test('renew and release act on one owner; the others keep theirs', async () => {
    const key = uniqueKey('per-owner');
    const store = newStore();
    const other = newStore(); // an owner this store has not seen: found in etcd
    await store.acquire(key, 'a', TTL, permit(3, 1));
    await store.acquire(key, 'b', TTL, permit(3, 1));
    await store.acquire(key, 'c', TTL, permit(3, 1));
    assert.equal(await store.renew(key, 'a', TTL), true);
    assert.equal(await store.release(key, 'a'), true);
    assert.equal(await store.renew(key, 'a', TTL), false);
    assert.equal(await store.release(key, 'a'), false);
    assert.equal(await other.release(key, 'c'), true);
    assert.equal(await other.release(key, 'c'), false);
    assert.equal(await store.renew(key, 'b', 2 * TTL), true); // a longer ttl: a new lease, same key
    assert.equal(await other.renew(key, 'b', TTL), true);
    const seen = await store.inspect(key);
    assert.deepEqual(seen.holders.map((h) => h.owner), ['b']);
    assert.equal(seen.limit, 3);
    assert.equal(await store.release(key, 'b'), true);
    assert.equal(await store.inspect(key), undefined);
  });

  test("a lapsed holder's permits go to the waiter; the other holder keeps its own", async () => {
    const key = uniqueKey('lapse');
    const store = newStore();
    const grants = claim(store, key);
    const short = await store.acquire(key, 'short', 1_000, permit(3, 2)); // never renewed
    const long = await store.acquire(key, 'long', TTL, permit(3, 1));
    assert.equal(await store.acquire(key, 'next', TTL, permit(3, 2, true)), undefined);
    const startedAt = performance.now();
    const next = await grants.granted('next');
    // etcd counts whole seconds (and raises a short TTL to its minimum): bounds catch hangs.
    assert.ok(performance.now() - startedAt < 8_000);
    assert.ok(next.fencingToken > long.fencingToken && long.fencingToken > short.fencingToken);
    assert.equal(await store.renew(key, 'short', TTL), false);
    assert.equal(await store.renew(key, 'long', TTL), true);
    assert.deepEqual((await store.inspect(key)).holders.map((h) => h.owner), ['long', 'next']);
    await store.release(key, 'long');
    await store.release(key, 'next');
  });
});

describe('tokens and inspect', () => {
  test('tokens rise across every grant of a key, in any weight or mode of it', async () => {
    const key = uniqueKey('tokens');
    const stores2 = [newStore(), newStore()];
    const tokens = [];
    for (let round = 0; round < 3; round++) {
      for (const [i, store] of stores2.entries()) {
        const got = await store.acquire(key, `o${round}-${i}`, TTL, permit(3, 1 + i));
        tokens.push(got.fencingToken);
      }
      for (const [i, store] of stores2.entries()) assert.equal(await store.release(key, `o${round}-${i}`), true);
    }
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${tokens}`);
  });

  test('inspect shows every holder with its weight (and mode), the waiters and the limit', async () => {
    const key = uniqueKey('inspect');
    const store = newStore();
    claim(store, key);
    const r1 = await store.acquire(key, 'r1', TTL, permit(SHARED_LIMIT, 1));
    const r2 = await store.acquire(key, 'r2', TTL, permit(SHARED_LIMIT, 1));
    assert.equal(await store.acquire(key, 'w', TTL, permit(SHARED_LIMIT, SHARED_LIMIT, true)), undefined);
    const seen = await store.inspect(key);
    assert.equal(seen.key, key);
    assert.equal(seen.limit, SHARED_LIMIT);
    assert.deepEqual(
      seen.holders.map(({ owner, fencingToken, weight, mode }) => ({ owner, fencingToken, weight, mode })),
      [
        { owner: 'r1', fencingToken: r1.fencingToken, weight: 1, mode: 'shared' },
        { owner: 'r2', fencingToken: r2.fencingToken, weight: 1, mode: 'shared' },
      ],
    );
    for (const h of seen.holders) assert.ok(h.ttl > 0 && h.ttl <= TTL);
    assert.deepEqual(seen.waiters, [{ owner: 'w' }]);
    assert.deepEqual([...(await collect(store.list({ prefix: key })))], [key]);
    await store.release(key, 'w');
    await store.release(key, 'r1');
    await store.release(key, 'r2');
    const plainKey = uniqueKey('inspect-plain');
    const plain = await store.acquire(plainKey, 'p', TTL);
    const plainSeen = await store.inspect(plainKey);
    assert.equal('limit' in plainSeen, false);
    assert.deepEqual(plainSeen.holders.map((h) => [h.owner, h.fencingToken, h.weight]), [['p', plain.fencingToken, undefined]]);
    await store.release(plainKey, 'p');
  });
});

async function collect(iterable) {
  const out = [];
  for await (const x of iterable) out.push(x);
  return out;
}

describe('the engine, across processes', () => {
  test('locks disagreeing on a limit get LockLimitMismatchError; modes run readers together', async () => {
    const key = uniqueKey('engine-limits');
    const store = newStore();
    const held = await acquireLock(store, key, TTL, { limit: 3 });
    await assert.rejects(acquireLock(store, key, TTL), { name: 'LockLimitMismatchError', limit: 1, heldWith: 3 });
    await assert.rejects(acquireLock(newStore(), key, TTL, { limit: 4, wait: 1_000 }), LockLimitMismatchError);
    await held.release();
    const readersKey = uniqueKey('engine-modes');
    // Each reader stays inside until all three are: only readers together get out.
    let inside = 0;
    let allIn;
    const together = new Promise((resolve) => (allIn = resolve));
    const read = () =>
      withLock({ key: readersKey, store, ttl: TTL, wait: 10_000, mode: 'shared' }, async () => {
        if (++inside === 3) allIn();
        await within(8_000, 'three readers inside at once', together);
      });
    await Promise.all([read(), read(), read()]);
    await withLock({ key: readersKey, store, ttl: TTL, mode: 'exclusive' }, async () => {});
  });

  test('pipelines with a limit in three processes: never more than the limit inside, weights summed', async () => {
    const key = uniqueKey('fleet');
    // Weights 1, 1 and 2 of 3, two executions at a time in each process.
    const workers = [1, 1, 2].map((weight, i) =>
      startWorker(['run', key, '3', String(weight), '2', '6'], `run ${i}`),
    );
    await within(FLEET_READY_MS, 'the workers ready', Promise.all(workers.map((w) => w.ready)));
    for (const w of workers) w.go();
    const results = await within(FLEET_DONE_MS, 'the workers done', Promise.all(workers.map((w) => w.result)));
    for (const r of results) {
      assert.deepEqual(r.errors, []);
      assert.equal(r.completed, 12);
      assert.ok(r.max <= 3, `${r.max} permits inside at once`);
    }
    // More than one execution inside at once, some time (the limit is not a mutex).
    assert.ok(results.some((r) => r.max >= 2));
    const tokens = results.flatMap((r) => r.tokens);
    assert.equal(new Set(tokens).size, tokens.length); // every grant its own token
  });

  test("a holder SIGKILLed: its permits go to the next waiter after its ttl, its late fenced write is refused", async () => {
    const key = uniqueKey('killed');
    const holder = startWorker(['hold', key, '3', '2', '1000'], 'holder');
    holder.ready.catch(() => {}); // it prints no ready line, and dies
    const { held } = await within(10_000, 'the holder', holder.result);
    const fence = fencedResource(key);
    assert.equal(await fence.write(held), true);
    const store = newStore();
    const other = await acquireLock(store, key, TTL, { limit: 3, weight: 1 }); // 2 + 1 fit
    const waiting = acquireLock(store, key, TTL, { wait: 15_000, limit: 3, weight: 2 }); // 2 + 1 + 2 do not
    await sleep(100);
    holder.child.kill('SIGKILL');
    const killedAt = performance.now();
    const next = await within(10_000, 'the permits after the holder died', waiting);
    // Within its lease's ttl (1 s, whole seconds, or the server's minimum) and a bit.
    assert.ok(performance.now() - killedAt < 8_000);
    assert.ok(next.fencingToken > held && next.fencingToken > other.fencingToken);
    assert.equal(await fence.write(next.fencingToken), true);
    assert.equal(await fence.write(held), false); // the dead holder's write, late
    assert.deepEqual(await holder.exited, { code: null, signal: 'SIGKILL' });
    await next.release();
    await other.release();
  });
});

/**
 * A resource in etcd that takes a write only with a token at least the last one taken
 * (compared by etcd: tokens written zero-padded, so their bytes order as numbers).
 */
function fencedResource(key) {
  const client = clients[0] ?? new Etcd3({ hosts: etcd.endpoints });
  const name = `${key}-fence`;
  const pad = (token) => String(token).padStart(16, '0');
  return {
    async write(token) {
      const value = pad(token);
      const reply = await client
        .if(name, 'Value', '<', pad(token + 1))
        .then(client.put(name).value(value))
        .else(client.get(name))
        .commit();
      if (reply.succeeded) return true;
      if (reply.responses[0].response_range.kvs.length > 0) return false;
      // No write yet: the first one is taken.
      const first = await client.if(name, 'Create', '==', 0).then(client.put(name).value(value)).commit();
      return first.succeeded;
    },
  };
}
