// RedisLockStore through the engine when handovers meet failures and callers who give
// up, against a real Redis server: a caller aborting while its queueing try is in flight
// or as its grant arrives, the store's own connection killed (CLIENT KILL) during an
// acquire or a release while waiters are queued, and close() while waiters wait. Every
// scenario checks that every execution settles (nothing hangs), that no two callbacks
// hold the key at once, that the errors are the README's, and that the key is free once
// everyone settled. Run: node --test js-tests/redis-grants.test.mjs
// (LEASEHOLD_ENGINE=wasm runs it on the wasm engine.)

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { engine, ResiliencePipelineBuilder, LockStoreError, getLockToken } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { call, startRedisServer, waitFor } from './support/redis.mjs';
import { within } from './support/async.mjs';
import { deferred } from './support/time.mjs';
import { uniqueKey } from './support/keys.mjs';
import { NAMED_CLIENTS } from './support/redis-clients.mjs';

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

const noop = () => {};

const KINDS = NAMED_CLIENTS;

let server;
const clients = [];
const stores = [];

before(async () => {
  server = await startRedisServer();
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const [kind, client] of clients) kind.close(client);
  await server?.stop();
  assert.deepEqual(unhandled, [], 'no unhandled rejection in the whole file');
});

/** A store on a client of its own, whose connection is named `name`. */
async function newStore(kindName, name, options = {}) {
  const kind = KINDS[kindName];
  const client = await kind.connect(server.port, name);
  clients.push([kind, client]);
  const store = new RedisLockStore({ client, ...options });
  stores.push(store);
  return store;
}

/** Drops every connection named `name` (CLIENT KILL ID); resolves to how many. */
async function kill(name) {
  const text = await call(server.port, ['CLIENT', 'LIST']);
  const ids = text
    .split('\n')
    .filter((line) => line.includes(` name=${name} `))
    .map((line) => /id=(\d+)/.exec(line)[1]);
  for (const id of ids) await call(server.port, ['CLIENT', 'KILL', 'ID', id]).catch(noop);
  return ids.length;
}

// Each test has a prefix of its own: the tests of a group run at the same time.
const grantChannels = (prefix) => call(server.port, ['PUBSUB', 'CHANNELS', `${prefix}:grants:*`]);
const queueLength = (prefix, key) => call(server.port, ['LLEN', `${prefix}:{${key}}:queue`]);

/**
 * Executions on one key through the RedisLockStores given, counting holders. `start`
 * returns a record whose `settled` promise never rejects: `{ value }` or `{ error }`.
 */
function contenders(key) {
  const c = { ran: [], holders: 0, maxHolders: 0, all: [] };
  c.start = (name, store, { ttl = 2000, wait = 5000, signal, body } = {}) => {
    const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl, wait }).build();
    const rec = { name };
    rec.settled = pipeline
      .execute(
        async (ctx) => {
          c.holders += 1;
          c.maxHolders = Math.max(c.maxHolders, c.holders);
          c.ran.push(name);
          try {
            return await (body ? body(ctx) : getLockToken(ctx));
          } finally {
            c.holders -= 1;
          }
        },
        { signal },
      )
      .then((value) => ({ value }), (error) => ({ error }));
    c.all.push(rec);
    return rec;
  };
  /** Holds until `release()`; `holding` resolves once its callback runs. */
  c.hold = (name, store, options) => {
    const done = deferred();
    const holding = deferred();
    const rec = c.start(name, store, {
      ...options,
      body: () => {
        holding.resolve();
        return done.promise;
      },
    });
    return { rec, holding: holding.promise, release: () => done.resolve() };
  };
  /** Every execution settled in time, never two holders, and the key free in the end. */
  c.check = async (store, limit = 5000) => {
    await within(limit, `every execution on ${key} settled`, Promise.all(c.all.map((r) => r.settled)));
    assert.equal(c.maxHolders, 1, 'never two holders');
    await waitFor(`${key} free`, async () => !(await store.isLocked(key)), { timeoutMs: 2500, intervalMs: 10 });
  };
  return c;
}

test(`the engine in use is the one asked for (${engine})`, () => {
  assert.equal(engine, process.env.LEASEHOLD_ENGINE || 'native');
});

describe('a caller that gives up while its owner is queued in Redis', { concurrency: true }, () => {
  for (const kindName of Object.keys(KINDS)) {
    // W's try is queued at the server, but its answer is held back (a slow link); W's
    // caller aborts meanwhile; the holder then releases: W's grant (before or after the
    // held answer) is released by W's store and passes on to X.
    for (const grantFirst of [false, true]) {
      test(`${kindName}: aborted while its queueing try is in flight; grant ${grantFirst ? 'before' : 'after'} the try's answer`, async () => {
        const key = uniqueKey(`abort-in-flight-${kindName}`);
        const prefix = uniqueKey('grants');
        const storeH = await newStore(kindName, uniqueKey('h'), { prefix, handOffAfter: 0 });
        const storeX = await newStore(kindName, uniqueKey('x'), { prefix, handOffAfter: 0 });
        const others = await grantChannels(prefix);
        const storeW = await newStore(kindName, uniqueKey('w'), { prefix, handOffAfter: 0 });
        const storeWClient = clients.at(-1)[1];
        storeW.subscribe('warm-up', noop)(); // its grant channel, subscribed for good
        await waitFor('W listens for grants', async () => (await grantChannels(prefix)).some((ch) => !others.includes(ch)));
        const c = contenders(key);
        const h = c.hold('H', storeH);
        await within(2000, 'H holds', h.holding);
        // Hold back the reply to W's next script (its queueing try), as a slow link would.
        const answer = deferred();
        const client = storeWClient;
        const method = typeof client.evalSha === 'function' ? 'evalSha' : 'evalsha';
        const evalsha = client[method].bind(client);
        let held = false;
        client[method] = async (...args) => {
          const reply = await evalsha(...args);
          if (!held) {
            held = true;
            await answer.promise;
          }
          return reply;
        };
        const controller = new AbortController();
        const w = c.start('W', storeW, { signal: controller.signal });
        await waitFor('W queued in Redis', async () => (await queueLength(prefix, key)) === 1, { intervalMs: 2 });
        controller.abort(new Error('W gave up'));
        assert.equal((await within(1000, 'W settled', w.settled)).error?.message, 'W gave up');
        const x = c.start('X', storeX);
        await waitFor('X queued behind W', async () => (await queueLength(prefix, key)) === 2, { intervalMs: 2 });
        if (grantFirst) {
          h.release();
          await sleep(50);
          answer.resolve();
        } else {
          answer.resolve();
          await sleep(20);
          h.release();
        }
        assert.ok(Number.isSafeInteger((await within(3000, 'X ran', x.settled)).value), 'X ran');
        assert.deepEqual(c.ran, ['H', 'X']);
        await c.check(storeX);
      });
    }

    test(`${kindName}: aborted as its grant arrives (a listener ahead of the engine's aborts it)`, async () => {
      const key = uniqueKey(`abort-at-grant-${kindName}`);
      const prefix = uniqueKey('grants');
      const storeH = await newStore(kindName, uniqueKey('h'), { prefix, handOffAfter: 0 });
      const storeW = await newStore(kindName, uniqueKey('w'), { prefix, handOffAfter: 0 });
      const storeX = await newStore(kindName, uniqueKey('x'), { prefix, handOffAfter: 0 });
      const c = contenders(key);
      const controller = new AbortController();
      const stop = storeW.subscribe(key, (grant) => {
        if (grant !== undefined) controller.abort(new Error('at the grant'));
        return false;
      });
      const h = c.hold('H', storeH);
      await within(2000, 'H holds', h.holding);
      const w = c.start('W', storeW, { signal: controller.signal });
      await waitFor('W queued in Redis', async () => (await queueLength(prefix, key)) === 1, { intervalMs: 2 });
      const x = c.start('X', storeX);
      await waitFor('X queued behind W', async () => (await queueLength(prefix, key)) === 2, { intervalMs: 2 });
      h.release();
      assert.equal((await within(2000, 'W settled', w.settled)).error?.message, 'at the grant');
      assert.ok(Number.isSafeInteger((await within(3000, 'X ran', x.settled)).value), 'X ran');
      stop();
      assert.deepEqual(c.ran, ['H', 'X']);
      await c.check(storeX);
    });
  }
});

describe("the store's connection killed while waiters are queued", { concurrency: true }, () => {
  for (const kindName of Object.keys(KINDS)) {
    // The waiter's own connection dies while its poll is at the server: ioredis sends
    // it again (the waiter waits on), node-redis rejects it (LockStoreError, method
    // acquire). Either way the next waiter runs, and the key ends free.
    test(`${kindName}: killed during a waiter's acquire`, async () => {
      const key = uniqueKey(`kill-acquire-${kindName}`);
      const prefix = uniqueKey('grants');
      const wName = uniqueKey('w');
      const storeH = await newStore(kindName, uniqueKey('h'), { prefix });
      const others = await grantChannels(prefix);
      const storeW = await newStore(kindName, wName, { prefix });
      // Listening for grants before W's first try, so that the try queues W: a try that
      // does not, and a poll that then fails (node-redis), would leave W never queued.
      storeW.subscribe('warm-up', noop)();
      await waitFor('W listens for grants', async () => (await grantChannels(prefix)).some((ch) => !others.includes(ch)));
      const storeX = await newStore(kindName, uniqueKey('x'), { prefix });
      const c = contenders(key);
      const h = c.hold('H', storeH);
      await within(2000, 'H holds', h.holding);
      const acquire = storeW.acquire.bind(storeW);
      let calls = 0;
      const killed = deferred();
      storeW.acquire = (...args) => {
        calls += 1;
        if (calls === 2) {
          // The poll (50 ms after the first try): its connection dies as it is sent.
          const pending = acquire(...args);
          kill(wName).then(killed.resolve, killed.resolve);
          return pending;
        }
        return acquire(...args);
      };
      const w = c.start('W', storeW);
      await waitFor('W queued in Redis', async () => (await queueLength(prefix, key)) === 1, { intervalMs: 2 });
      const x = c.start('X', storeX);
      await within(2000, 'the kill', killed.promise);
      await sleep(100);
      h.release();
      const [ow, ox] = await within(5000, 'W and X settled', Promise.all([w.settled, x.settled]));
      if (ow.error) {
        assert.ok(ow.error instanceof LockStoreError, String(ow.error));
        assert.equal(ow.error.method, 'acquire');
        assert.deepEqual(c.ran, ['H', 'X']);
      } else {
        assert.deepEqual(c.ran, ['H', 'W', 'X']);
      }
      assert.ok(ox.value !== undefined, `X ran: ${ox.error}`);
      await c.check(storeX);
    });

    // The holder's connection dies while its release is at the server (held there by
    // CLIENT PAUSE WRITE): the execution still resolves with its value (a failed release
    // is only reported), and the waiters get the key: at once when the release ran,
    // or when the lease runs out.
    test(`${kindName}: killed during the holder's release`, async () => {
      const key = uniqueKey(`kill-release-${kindName}`);
      const prefix = uniqueKey('grants');
      const hName = uniqueKey('h');
      const storeH = await newStore(kindName, hName, { prefix });
      const storeW = await newStore(kindName, uniqueKey('w'), { prefix });
      const storeX = await newStore(kindName, uniqueKey('x'), { prefix });
      const c = contenders(key);
      const events = [];
      const h = c.hold('H', storeH, { ttl: 1000 });
      await within(2000, 'H holds', h.holding);
      const w = c.start('W', storeW, { ttl: 1000 });
      const x = c.start('X', storeX, { ttl: 1000 });
      await waitFor('W and X queued in Redis', async () => (await queueLength(prefix, key)) === 2, { intervalMs: 2 });
      await call(server.port, ['CLIENT', 'PAUSE', '300', 'WRITE']);
      h.release();
      await sleep(50);
      events.push(await kill(hName));
      assert.equal(events[0], 1, "H's connection was killed");
      const oh = await within(3000, 'H settled', h.rec.settled);
      assert.equal(oh.error, undefined, `H resolves: ${oh.error}`);
      const [ow, ox] = await within(5000, 'W and X settled', Promise.all([w.settled, x.settled]));
      assert.ok(ow.value !== undefined && ox.value !== undefined, `${ow.error} ${ox.error}`);
      // A lease that runs out hands over to nobody: the waiters' polls race for it.
      assert.deepEqual(c.ran.slice(0, 1), ['H']);
      assert.deepEqual([...c.ran].sort(), ['H', 'W', 'X']);
      await c.check(storeX);
    });
  }
});

describe('close() while waiters wait', { concurrency: true }, () => {
  /** H holds the key through one store, W waits through another and is queued in Redis. */
  async function waiterQueued(kindName, what) {
    const key = uniqueKey(`${what}-${kindName}`);
    const prefix = uniqueKey('grants');
    const storeH = await newStore(kindName, uniqueKey('h'), { prefix });
    const storeW = await newStore(kindName, uniqueKey('w'), { prefix });
    const c = contenders(key);
    const h = c.hold('H', storeH);
    await within(2000, 'H holds', h.holding);
    const w = c.start('W', storeW);
    await waitFor('W queued in Redis', async () => (await queueLength(prefix, key)) === 1, { intervalMs: 2 });
    return { key, prefix, storeH, storeW, c, h, w };
  }

  for (const kindName of Object.keys(KINDS)) {
    // W's store closes while W waits: W leaves the Redis queue and polls; the holder's
    // release then frees the key, and W takes it at its next poll (within a second).
    test(`${kindName}: the waiter's store closes; it polls and runs`, async () => {
      const { key, prefix, storeH, storeW, c, h, w } = await waiterQueued(kindName, 'close-waiter');
      await storeW.close();
      assert.equal(await queueLength(prefix, key), 0, 'W left the queue');
      h.release();
      const ow = await within(2500, 'W ran', w.settled);
      assert.ok(ow.value !== undefined, String(ow.error));
      await c.check(storeH);
    });

    // The holder's store closes while waiters wait: its release still goes through the
    // open client and hands the lease over.
    test(`${kindName}: the holder's store closes; its release still hands over`, async () => {
      const { storeH, storeW, c, h, w } = await waiterQueued(kindName, 'close-holder');
      await storeH.close();
      h.release();
      const ow = await within(2500, 'W ran', w.settled);
      assert.ok(ow.value !== undefined, String(ow.error));
      await c.check(storeW);
    });
  }
});
