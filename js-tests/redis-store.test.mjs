// RedisLockStore against real Redis servers (standalone and a 3-master cluster), through
// both ioredis and node-redis. Nothing is mocked. Run: node --test js-tests/redis-store.test.mjs

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { createClient, createCluster } from 'redis';
import { RedisLockStore } from '../lib/stores/redis/index.mjs';
import {
  call,
  commandStats,
  freePort,
  startRedisCluster,
  startRedisServer,
  waitFor,
} from './support/redis.mjs';
import { within } from './support/async.mjs';
import {
  connectIoredis,
  connectNodeRedis,
  unreachableIoredis,
  unreachableNodeRedis,
} from './support/redis-clients.mjs';
import { uniqueKey } from './support/keys.mjs';
import { deferred } from './support/time.mjs';

// ---------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------

/** The store's Redis name for a plain key (no `%`, `{`, `}`, lone surrogates). */
const leaseName = (prefix, key) => `${prefix}:{${key}}`;

/**
 * Subscribers (summed over `ports`) on channels matching `pattern`. A store's own grant
 * channel (`<prefix>:grants:<id>`, subscribed from its first `subscribe`) counts only
 * when the pattern names it.
 */
async function subscriberCount(ports, pattern) {
  let n = 0;
  for (const port of ports) {
    let channels = await call(port, ['PUBSUB', 'CHANNELS', pattern]);
    if (!pattern.includes(':grants:')) channels = channels.filter((c) => !c.includes(':grants:'));
    if (channels.length === 0) continue;
    const reply = await call(port, ['PUBSUB', 'NUMSUB', ...channels]);
    for (let i = 1; i < reply.length; i += 2) n += reply[i];
  }
  return n;
}

async function pubsubConnections(port) {
  const list = await call(port, ['CLIENT', 'LIST', 'TYPE', 'pubsub']);
  return list.split('\n').filter((l) => l.trim() !== '').length;
}

const noop = () => {};

/**
 * Lets a test hold back what the subscriber connections opened from `client` (the
 * store's `client.duplicate()`) receive: from `hold()` on, messages wait, until
 * `deliver()` hands them over in order. ioredis listens with `on('message')`,
 * node-redis with a listener passed to `subscribe`.
 */
function gateMessages(client) {
  let held;
  const gated = (fn) => (...args) => (held ? held.push(() => fn(...args)) : fn(...args));
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (...options) => {
    const dup = duplicate(...options);
    const on = dup.on.bind(dup);
    dup.on = (event, fn) => on(event, event === 'message' ? gated(fn) : fn);
    const wrapped = new Map();
    const wrap = (args) => {
      const last = args.at(-1);
      if (typeof last !== 'function') return args;
      if (!wrapped.has(last)) wrapped.set(last, gated(last));
      return [...args.slice(0, -1), wrapped.get(last)];
    };
    const subscribe = dup.subscribe.bind(dup);
    const unsubscribe = dup.unsubscribe.bind(dup);
    dup.subscribe = (...args) => subscribe(...wrap(args));
    dup.unsubscribe = (...args) => unsubscribe(...wrap(args));
    return dup;
  };
  return {
    hold() {
      held = [];
    },
    held: () => held?.length ?? 0,
    deliver() {
      const messages = held ?? [];
      held = undefined;
      for (const message of messages) message();
    },
  };
}

// Keys that a naive `{${key}}` tag would break or make collide.
const AWKWARD_KEYS = [
  'a',
  'a}',
  '{a}',
  '{a',
  'a{',
  '}a',
  '}',
  '{',
  '{}',
  '%',
  '%7D',
  'a%7D',
  '%25',
  '%u',
  '*',
  'a*',
  '?[]',
  'a b',
  ' ',
  'a\nb',
  'a\r\nb',
  '\n',
  '\t',
  '\u0000',
  'lock:{a}',
  ':token',
  'a}:token',
  '🔒',
  '🔒}{',
  'ключ',
  '鍵',
  'e\u0301',
  '\u00e9',
  '\uD800', // lone surrogates: every client sends both as the bytes of U+FFFD
  '\uDC00',
  '\uD83D',
];

// ---------------------------------------------------------------------------------
// clients
// ---------------------------------------------------------------------------------

const KINDS = [
  {
    name: 'ioredis',
    connect: connectIoredis,
    async connectCluster(nodes) {
      const client = new Redis.Cluster(nodes, { lazyConnect: true });
      client.on('error', noop);
      await client.connect();
      return client;
    },
    unreachable: unreachableIoredis,
    async connectWithoutReconnect(port) {
      const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null });
      client.on('error', noop);
      await client.connect();
      return client;
    },
    async close(client) {
      client.disconnect();
    },
  },
  {
    name: 'node-redis',
    connect: connectNodeRedis,
    async connectCluster(nodes) {
      const client = createCluster({ rootNodes: nodes.map((n) => ({ socket: n })) });
      client.on('error', noop);
      await client.connect();
      return client;
    },
    unreachable: unreachableNodeRedis,
    async connectWithoutReconnect(port) {
      const client = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false } });
      client.on('error', noop);
      await client.connect();
      return client;
    },
    async close(client) {
      try {
        client.destroy();
      } catch {
        // already closed
      }
    },
  },
];

// ---------------------------------------------------------------------------------
// constructor (no server needed)
// ---------------------------------------------------------------------------------

describe('RedisLockStore constructor', () => {
  test('rejects a missing or unrecognisable client and a bad prefix, naming them', () => {
    const client = new Redis({ lazyConnect: true });
    try {
      assert.throws(() => new RedisLockStore(), { name: 'TypeError', message: /options/ });
      assert.throws(() => new RedisLockStore({}), { name: 'TypeError', message: /client/ });
      assert.throws(() => new RedisLockStore({ client: null }), { name: 'TypeError', message: /client/ });
      assert.throws(() => new RedisLockStore({ client: {} }), { name: 'TypeError', message: /client/ });
      assert.throws(() => new RedisLockStore({ client: { get() {}, set() {} } }), { name: 'TypeError', message: /client/ });
      assert.throws(() => new RedisLockStore({ client, prefix: '' }), { name: 'TypeError', message: /prefix/ });
      assert.throws(() => new RedisLockStore({ client, prefix: 7 }), { name: 'TypeError', message: /prefix/ });
      assert.throws(() => new RedisLockStore({ client, prefix: 'a{b' }), { name: 'TypeError', message: /prefix/ });
      assert.throws(() => new RedisLockStore({ client, prefix: 'a}' }), { name: 'TypeError', message: /prefix/ });
      assert.throws(() => new RedisLockStore({ client, handoffAfter: 0 }), { name: 'TypeError', message: /no option "handoffAfter"; .*\bhandOffAfter\b/ });
      assert.equal(new RedisLockStore({ client }).prefix, 'lock');
      assert.equal(new RedisLockStore({ client: createClient(), prefix: 'p' }).prefix, 'p');
    } finally {
      client.disconnect();
    }
  });

  test('the CommonJS and ESM entries export the same class', async () => {
    const { createRequire } = await import('node:module');
    const require = createRequire(import.meta.url);
    assert.equal(require('../lib/stores/redis/index.cjs').RedisLockStore, RedisLockStore);
  });
});

describe('RedisLockStore subscriptions (a client that records them, no server)', () => {
  /** An ioredis-shaped client whose subscriber connection records the channels it is told. */
  function recordingClient() {
    const subscribed = new Set();
    const subscribes = []; // every channel a SUBSCRIBE named, in order
    const unsubscribes = [];
    const control = { hold: undefined }; // a promise: SUBSCRIBEs answer once it settles
    const subscriber = {
      status: 'ready',
      on: () => subscriber,
      async subscribe(...channels) {
        subscribes.push(...channels);
        await control.hold;
        for (const c of channels) subscribed.add(c);
      },
      async unsubscribe(...channels) {
        unsubscribes.push(...channels);
        for (const c of channels) subscribed.delete(c);
      },
      disconnect() {},
    };
    const client = { evalsha: async () => null, eval: async () => null, pttl: async () => -2, duplicate: () => subscriber };
    return { client, subscribed, subscribes, unsubscribes, control };
  }
  const turns = async (n = 5) => {
    for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  test('a key waited for in the turn another key lost its last listener is subscribed at once, not after the linger', async () => {
    const { client, subscribed } = recordingClient();
    const store = new RedisLockStore({ client, prefix: 'p' });
    const offA = store.subscribe('a', noop);
    await turns();
    assert.ok(subscribed.has('p:{a}:released'));
    // One waiter leaves (its channel lingers) and a waiter for another key comes, in one
    // turn: the pass for the first change ends in that turn, with nothing to send.
    offA();
    store.subscribe('b', noop);
    await turns();
    assert.ok(subscribed.has('p:{b}:released'), `subscribed: ${[...subscribed].join(', ')}`);
    assert.ok(subscribed.has('p:{a}:released'), 'the channel left lingers');
    await store.close();
  });

  test('a lingering channel waited for again while another SUBSCRIBE is in flight stays subscribed', async () => {
    const { client, subscribed, subscribes, unsubscribes, control } = recordingClient();
    const store = new RedisLockStore({ client, prefix: 'p' });
    const a = 'p:{a}:released';
    const offFirst = store.subscribe('a', noop);
    await turns();
    offFirst();
    await turns();
    assert.ok(subscribed.has(a), 'subscribed, then lingering');
    await sleep(900);
    let answer;
    control.hold = new Promise((resolve) => {
      answer = resolve;
    });
    const offB = store.subscribe('b', noop); // a pass now waits on b's SUBSCRIBE
    await sleep(200); // a's linger is over meanwhile
    const offA = store.subscribe('a', noop); // a waiter on a again
    await turns();
    answer();
    await turns(20);
    assert.deepEqual(unsubscribes, [], 'a was not unsubscribed under its new waiter');
    assert.ok(subscribed.has(a));
    assert.equal(subscribes.filter((c) => c === a).length, 1, 'nor subscribed again');
    offA();
    offB();
    await store.close();
  });

  test('waiters on many keys that leave one at a time: every channel lingers, then goes; one waited for again stays, subscribed once', async () => {
    const { client, subscribed, subscribes } = recordingClient();
    const store = new RedisLockStore({ client, prefix: 'p' });
    const keys = Array.from({ length: 3000 }, (_, i) => `k${i}`);
    const offs = [];
    for (const key of keys) {
      offs.push(store.subscribe(key, noop));
      await turns(1);
    }
    await turns();
    assert.equal(keys.filter((k) => subscribed.has(`p:{${k}}:released`)).length, keys.length, 'every key subscribed');
    let back;
    for (const [i, off] of offs.entries()) {
      off();
      if (i === 2000) back = store.subscribe('k7', noop); // k7 left at i = 7: waited for again
      await turns(1);
    }
    await turns();
    assert.equal(keys.filter((k) => subscribed.has(`p:{${k}}:released`)).length, keys.length, 'all linger at first');
    await waitFor('the lingering channels to go', async () => subscribed.size === 2, { timeoutMs: 5000 });
    assert.deepEqual([...subscribed].sort(), ['p:{k7}:released', [...subscribed].find((c) => c.startsWith('p:grants:'))].sort());
    assert.equal(subscribes.filter((c) => c === 'p:{k7}:released').length, 1, 'k7 was never subscribed again');
    back();
    await store.close();
  });
});

// ---------------------------------------------------------------------------------
// standalone server
// ---------------------------------------------------------------------------------

describe('standalone Redis', () => {
  let server;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    await server?.stop();
  });

  for (const kind of KINDS) {
    describe(`through ${kind.name}`, () => {
      const prefix = `t-${kind.name}`;
      const clients = [];
      const stores = [];
      let client;
      let store;

      async function newClient() {
        const c = await kind.connect(server.port);
        clients.push(c);
        return c;
      }
      function newStore(options) {
        const s = new RedisLockStore(options);
        stores.push(s);
        return s;
      }

      before(async () => {
        client = await newClient();
        store = newStore({ client, prefix });
      });
      after(async () => {
        await Promise.allSettled(stores.map((s) => s.close()));
        await Promise.allSettled(clients.map((c) => kind.close(c)));
      });

      test('acquire, held, renew, release, with owner checks', async () => {
        const key = uniqueKey('basic');
        const lease = await store.acquire(key, 'A', 10_000);
        assert.ok(lease, 'a free key is acquired');
        assert.ok(Number.isSafeInteger(lease.fencingToken) && lease.fencingToken > 0, `token ${lease.fencingToken}`);
        assert.deepEqual(Object.keys(lease), ['fencingToken']);

        assert.equal(await store.acquire(key, 'B', 10_000), undefined, 'held: another owner');
        assert.equal(await store.acquire(key, 'A', 10_000), undefined, 'held: the same owner (not reentrant)');
        assert.equal(await store.isLocked(key), true);
        const left = await store.ttl(key);
        assert.ok(left > 9_000 && left <= 10_000, `ttl ${left}`);

        assert.equal(await store.renew(key, 'B', 10_000), false, 'renew by another owner');
        assert.equal(await store.renew(key, 'A', 60_000), true, 'renew by the owner');
        const renewed = await store.ttl(key);
        assert.ok(renewed > 50_000 && renewed <= 60_000, `renewed ttl ${renewed}`);

        assert.equal(await store.release(key, 'B'), false, 'release by another owner');
        assert.equal(await store.isLocked(key), true, "another owner's release leaves the lease alone");
        assert.equal(await store.release(key, 'A'), true, 'release by the owner');
        assert.equal(await store.isLocked(key), false);
        assert.equal(await store.ttl(key), undefined);
        assert.equal(await store.release(key, 'A'), false, 'a second release');
        assert.equal(await store.renew(key, 'A', 10_000), false, 'renew after release');
        assert.equal(await store.isLocked(key), false, 'renew after release does not resurrect the lease');

        const again = await store.acquire(key, 'B', 10_000);
        assert.ok(again.fencingToken > lease.fencingToken, 'the next holder gets a larger token');
        assert.equal(await store.release(key, 'B'), true);
      });

      test('keys are independent, and so are stores with different prefixes', async () => {
        const k1 = uniqueKey('indep');
        const k2 = uniqueKey('indep');
        const other = newStore({ client, prefix: `${prefix}-other` });
        assert.ok(await store.acquire(k1, 'A', 10_000));
        assert.ok(await store.acquire(k2, 'A', 10_000));
        assert.ok(await other.acquire(k1, 'A', 10_000));
        assert.equal(await store.release(k1, 'A'), true);
        assert.equal(await store.isLocked(k2), true);
        assert.equal(await other.isLocked(k1), true);
        assert.equal(await store.release(k2, 'A'), true);
        assert.equal(await other.release(k1, 'A'), true);
      });

      test('a lease expires after its ttl; then the old owner can neither renew nor release it', async () => {
        const key = uniqueKey('expiry');
        const first = await store.acquire(key, 'A', 80);
        assert.ok(first);
        const left = await store.ttl(key);
        assert.ok(left > 0 && left <= 80, `ttl ${left}`);
        assert.equal(await store.acquire(key, 'B', 80), undefined);
        await waitFor('the lease to expire', async () => !(await store.isLocked(key)), { timeoutMs: 2000, intervalMs: 10 });
        assert.equal(await store.ttl(key), undefined);
        assert.equal(await store.renew(key, 'A', 10_000), false, 'renew after expiry');
        assert.equal(await store.release(key, 'A'), false, 'release after expiry');
        const second = await store.acquire(key, 'B', 10_000);
        assert.ok(second, 'an expired lease can be taken');
        assert.ok(second.fencingToken > first.fencingToken, 'token increases across expiry');
        assert.equal(await store.release(key, 'A'), false, "the old owner cannot release the new holder's lease");
        assert.equal(await store.release(key, 'B'), true);
      });

      test('renew keeps a short lease alive past its original ttl', async () => {
        const key = uniqueKey('renew');
        // ttl 400 ms, renewed every ~25 ms for 1.2 s: each step has a 16x margin on a busy machine.
        assert.ok(await store.acquire(key, 'A', 400));
        const deadline = Date.now() + 1200;
        while (Date.now() < deadline) {
          assert.equal(await store.renew(key, 'A', 400), true);
          await sleep(25);
        }
        assert.equal(await store.isLocked(key), true);
        assert.equal(await store.release(key, 'A'), true);
      });

      test('fencing tokens strictly increase per key across release, expiry and lost data', async () => {
        const key = uniqueKey('tokens');
        const tokens = [];
        for (let i = 0; i < 25; i++) {
          const lease = await store.acquire(key, `o${i}`, 10_000);
          tokens.push(lease.fencingToken);
          assert.equal(await store.release(key, `o${i}`), true);
        }
        const expiring = await store.acquire(key, 'x', 30);
        tokens.push(expiring.fencingToken);
        await waitFor('the lease to expire', async () => !(await store.isLocked(key)), { timeoutMs: 2000, intervalMs: 10 });
        tokens.push((await store.acquire(key, 'y', 10_000)).fencingToken);
        // Redis losing the token counter (FLUSHALL) must not send tokens backwards.
        await call(server.port, ['FLUSHALL']);
        tokens.push((await store.acquire(key, 'z', 10_000)).fencingToken);
        for (let i = 1; i < tokens.length; i++) {
          assert.ok(tokens[i] > tokens[i - 1], `token ${i}: ${tokens[i]} > ${tokens[i - 1]}`);
        }
        assert.ok(tokens.every(Number.isSafeInteger));
        assert.equal(await store.release(key, 'z'), true);
      });

      test('the token key is not kept forever', async () => {
        const key = uniqueKey('retention');
        assert.ok(await store.acquire(key, 'A', 1000));
        const tokenTtl = await call(server.port, ['PTTL', `${leaseName(prefix, key)}:token`]);
        assert.ok(tokenTtl > 50_000 && tokenTtl <= 60_000, `token key pttl ${tokenTtl} (60 s floor)`);
        assert.ok(await store.renew(key, 'A', 100_000));
        assert.equal(await store.release(key, 'A'), true);
        assert.ok(await store.acquire(key, 'A', 100_000));
        const longer = await call(server.port, ['PTTL', `${leaseName(prefix, key)}:token`]);
        assert.ok(longer > 900_000 && longer <= 1_000_000, `token key pttl ${longer} (10 x ttl)`);
        assert.equal(await store.release(key, 'A'), true);
      });

      test('argument errors name the argument and never reach Redis', async () => {
        const cases = [
          [() => store.acquire('', 'o', 100), TypeError, /key/],
          [() => store.acquire(5, 'o', 100), TypeError, /key/],
          [() => store.acquire(undefined, 'o', 100), TypeError, /key/],
          [() => store.acquire('k', '', 100), TypeError, /owner/],
          [() => store.acquire('k', null, 100), TypeError, /owner/],
          [() => store.acquire('k', 'o', '100'), TypeError, /ttlMs/],
          [() => store.acquire('k', 'o', undefined), TypeError, /ttlMs/],
          [() => store.acquire('k', 'o', 0), RangeError, /ttlMs/],
          [() => store.acquire('k', 'o', -5), RangeError, /ttlMs/],
          [() => store.acquire('k', 'o', 1.5), RangeError, /ttlMs/],
          [() => store.acquire('k', 'o', NaN), RangeError, /ttlMs/],
          [() => store.acquire('k', 'o', Infinity), RangeError, /ttlMs/],
          [() => store.renew('', 'o', 100), TypeError, /key/],
          [() => store.renew('k', '', 100), TypeError, /owner/],
          [() => store.renew('k', 'o', 0), RangeError, /ttlMs/],
          [() => store.release('', 'o'), TypeError, /key/],
          [() => store.release('k', 7), TypeError, /owner/],
          [() => store.isLocked(''), TypeError, /key/],
          [() => store.ttl(null), TypeError, /key/],
        ];
        for (const [fn, type, message] of cases) {
          await assert.rejects(fn, (err) => err instanceof type && message.test(err.message), String(fn));
        }
        assert.throws(() => store.subscribe('', noop), { name: 'TypeError', message: /key/ });
        assert.throws(() => store.subscribe('k', 'not a function'), { name: 'TypeError', message: /onReleased/ });
        assert.equal(await call(server.port, ['EXISTS', leaseName(prefix, 'k')]), 0);
      });

      test('keys with braces, globs, spaces, newlines and any Unicode lock independently', async () => {
        const p = `${prefix}-awkward`;
        const s = newStore({ client, prefix: p });
        const leases = [];
        for (const [i, key] of AWKWARD_KEYS.entries()) {
          const lease = await s.acquire(key, `owner-${i}`, 10_000);
          assert.ok(lease, `acquire ${JSON.stringify(key)}: no other key may share its lease`);
          leases.push(lease);
        }
        // one lease and one token name per key, nothing shared
        const names = await call(server.port, ['KEYS', `${p}:*`]);
        assert.equal(names.length, 2 * AWKWARD_KEYS.length, 'two Redis names per key');
        for (const name of names) {
          // exactly one hash tag, opened right after the prefix and never closed early
          assert.match(name, /^[^{}]*:\{[^{}]+\}(:token)?$/su, `name ${JSON.stringify(name)}`);
        }
        for (const [i, key] of AWKWARD_KEYS.entries()) {
          assert.equal(await s.isLocked(key), true, JSON.stringify(key));
          assert.equal(await s.renew(key, `owner-${i}`, 10_000), true, JSON.stringify(key));
          assert.equal(await s.release(key, `owner-${(i + 1) % AWKWARD_KEYS.length}`), false, JSON.stringify(key));
        }
        for (const [i, key] of AWKWARD_KEYS.entries()) {
          assert.equal(await s.release(key, `owner-${i}`), true, JSON.stringify(key));
          for (const other of AWKWARD_KEYS.slice(i + 1)) {
            assert.equal(await s.isLocked(other), true, `releasing ${JSON.stringify(key)} left ${JSON.stringify(other)} alone`);
          }
        }
      });

      test('one EVALSHA round trip per acquire, renew and release, and no other command', async () => {
        const s = newStore({ client, prefix: `${prefix}-rtt` });
        const key = uniqueKey('rtt');
        // warm the script cache, then count
        assert.ok(await s.acquire(key, 'w', 10_000));
        assert.equal(await s.renew(key, 'w', 10_000), true);
        assert.ok(await s.release(key, 'w'));
        const N = 20;
        await call(server.port, ['CONFIG', 'RESETSTAT']);
        for (let i = 0; i < N; i++) {
          assert.ok(await s.acquire(key, `o${i}`, 10_000));
          assert.equal(await s.renew(key, `o${i}`, 10_000), true);
          assert.equal(await s.release(key, `o${i}`), true);
        }
        const stats = await commandStats(server.port);
        const calls = {};
        for (const [cmd, st] of Object.entries(stats)) {
          if (cmd.startsWith('config') || cmd === 'info') continue; // this test's own
          calls[cmd] = st.calls;
        }
        // Top level: EVALSHA only. The rest run inside the scripts (Redis counts those
        // too): acquire TYPE (free, and not a key held with permits), TIME, GET, SET,
        // SET; renew GET, PEXPIRE; release GET, EXISTS (is anyone queued? no), DEL,
        // PUBLISH. Any GET/SET sent by the store itself would show up here.
        assert.deepEqual(calls, {
          evalsha: 3 * N,
          type: N,
          exists: N,
          time: N,
          get: 3 * N,
          set: 2 * N,
          pexpire: N,
          del: N,
          publish: N,
        });
        assert.equal(stats.evalsha.failed_calls, 0);
      });

      test('NOSCRIPT: after SCRIPT FLUSH every operation still works, with one EVAL per script', async () => {
        const s = newStore({ client, prefix: `${prefix}-noscript` });
        const key = uniqueKey('noscript');
        assert.ok(await s.acquire(key, 'w', 10_000)); // cached on the server
        await call(server.port, ['SCRIPT', 'FLUSH']);
        await call(server.port, ['CONFIG', 'RESETSTAT']);
        const N = 5;
        assert.equal(await s.renew(key, 'w', 10_000), true);
        assert.equal(await s.release(key, 'w'), true);
        for (let i = 0; i < N; i++) {
          assert.ok(await s.acquire(key, `o${i}`, 10_000));
          assert.equal(await s.renew(key, `o${i}`, 10_000), true);
          assert.equal(await s.release(key, `o${i}`), true);
        }
        const stats = await commandStats(server.port);
        assert.equal(stats.evalsha.calls, 3 * N + 2);
        assert.equal(stats.evalsha.failed_calls, 3, 'one NOSCRIPT per script');
        assert.equal(stats.eval.calls, 3, 'one EVAL per script, which caches it');
        assert.equal(stats.eval.failed_calls, 0);
        assert.equal(stats.script, undefined, 'no SCRIPT LOAD/EXISTS round trips');
      });

      test('Redis errors reject unchanged, never as false or undefined', async () => {
        const key = uniqueKey('wrongtype');
        await call(server.port, ['HSET', leaseName(prefix, key), 'f', 'v']);
        await assert.rejects(store.renew(key, 'A', 1000), (err) => /WRONGTYPE/.test(err.message) && !(err instanceof TypeError));
        await assert.rejects(store.release(key, 'A'), /WRONGTYPE/);
        assert.equal(await store.acquire(key, 'A', 1000), undefined, 'a name in use is held');
        assert.equal(await store.isLocked(key), true);
        assert.equal(await store.ttl(key), Infinity, 'a foreign name without expiry');
        await call(server.port, ['DEL', leaseName(prefix, key)]);
      });

      test('a client with no server behind it rejects acquire with its own error, quickly', async () => {
        const dead = await kind.unreachable(await freePort());
        try {
          const s = new RedisLockStore({ client: dead });
          const started = Date.now();
          const err = await within(2000, 'acquire against no server', s.acquire('k', 'o', 1000).then(
            (v) => assert.fail(`acquire resolved ${JSON.stringify(v)}`),
            (e) => e,
          ));
          assert.ok(err instanceof Error, String(err));
          assert.ok(!(err instanceof TypeError) && !(err instanceof RangeError), `${err.name}: ${err.message}`);
          assert.match(err.message, /writeable|closed|ECONNREFUSED|connect/i);
          assert.ok(Date.now() - started < 2000);
          await assert.rejects(s.renew('k', 'o', 1000), (e) => e instanceof Error && !(e instanceof TypeError));
          await assert.rejects(s.release('k', 'o'), (e) => e instanceof Error && !(e instanceof TypeError));
          // subscribe never throws, even without a server
          const off = s.subscribe('k', noop);
          assert.equal(typeof off, 'function');
          off();
          await within(2000, 'close without a server', s.close());
        } finally {
          await kind.close(dead);
        }
      });

      describe('release announcements', () => {
        let publisher; // another connection, as another process would have
        before(async () => {
          publisher = newStore({ client: await newClient(), prefix: `${prefix}-sub` });
        });

        test('a release by another client reaches the listener; unsubscribe stops it', async () => {
          const sub = newStore({ client: await newClient(), prefix: `${prefix}-sub` });
          const pattern = `${prefix}-sub:*`;
          const key = 'a}\n{b 🔒 *';
          const fired = deferred();
          let calls = 0;
          const off = sub.subscribe(key, () => {
            calls++;
            fired.resolve();
          });
          await waitFor('the subscription', async () => (await subscriberCount([server.port], pattern)) === 1, { timeoutMs: 2000 });

          assert.ok(await publisher.acquire(key, 'P', 10_000));
          assert.equal(await publisher.release(key, 'nobody'), false);
          assert.equal(await publisher.release(key, 'P'), true);
          await within(2000, 'the release announcement', fired.promise);
          assert.equal(calls, 1, 'one call per release; a refused release announces nothing');

          off();
          off(); // idempotent
          await waitFor('the unsubscription', async () => (await subscriberCount([server.port], pattern)) === 0, { timeoutMs: 2000 });
          await sub.close();
        });

        test('listeners are reference counted per key; a throwing listener harms no one', async () => {
          const sub = newStore({ client: await newClient(), prefix: `${prefix}-sub` });
          const pattern = `${prefix}-sub:*`;
          const key = uniqueKey('refcount');
          const second = deferred();
          let firstCalls = 0;
          const offThrowing = sub.subscribe(key, () => {
            throw new Error('listener failure');
          });
          const offFirst = sub.subscribe(key, () => {
            firstCalls++;
          });
          const offSecond = sub.subscribe(key, () => second.resolve());
          const offOther = sub.subscribe(uniqueKey('other'), noop);
          await waitFor('two channels', async () => (await subscriberCount([server.port], pattern)) === 2, { timeoutMs: 2000 });

          offFirst();
          offThrowing();
          assert.ok(await publisher.acquire(key, 'P', 10_000));
          assert.equal(await publisher.release(key, 'P'), true);
          await within(2000, 'the release announcement', second.promise);
          assert.equal(firstCalls, 0, 'a removed listener is not called');
          assert.equal(await subscriberCount([server.port], pattern), 2, 'the channel stays while a listener remains');

          offSecond();
          await waitFor('one channel left', async () => (await subscriberCount([server.port], pattern)) === 1, { timeoutMs: 2000 });
          offOther();
          await waitFor('no channel left', async () => (await subscriberCount([server.port], pattern)) === 0, { timeoutMs: 2000 });
          await sub.close();
        });

        test('close() closes the subscriber connection; the store keeps working', async () => {
          const before = await pubsubConnections(server.port);
          const sub = newStore({ client: await newClient(), prefix: `${prefix}-sub` });
          const key = uniqueKey('close');
          sub.subscribe(key, noop);
          await waitFor('the subscriber connection', async () => (await pubsubConnections(server.port)) === before + 1, { timeoutMs: 2000 });
          await sub.close();
          await waitFor('the subscriber connection to close', async () => (await pubsubConnections(server.port)) === before, { timeoutMs: 2000 });
          const off = sub.subscribe(key, noop);
          assert.equal(typeof off, 'function', 'subscribe after close is a no-op');
          off();
          assert.ok(await sub.acquire(key, 'A', 1000));
          assert.equal(await sub.release(key, 'A'), true);
          await sub.close(); // idempotent
          assert.equal(await pubsubConnections(server.port), before);
        });
      });

      describe('grant on release', () => {
        /** A store whose subscribe listener records grants and claims them when told to. */
        function waiterStore(options = {}) {
          const s = newStore({ client, prefix: `${prefix}-grant`, ...options });
          const grants = [];
          let next = deferred();
          s.claims = true;
          // Resolves once the store listens on its grant channel (it queues owners only
          // from then on).
          s.listen = async (key) => {
            const pattern = `${prefix}-grant:grants:*`;
            const before = await subscriberCount([server.port], pattern);
            s.subscribe(key, (grant) => {
              if (grant === undefined) return false;
              grants.push(grant);
              next.resolve(grant);
              next = deferred();
              return s.claims;
            });
            await waitFor('the grant channel', async () => (await subscriberCount([server.port], pattern)) > before, {
              timeoutMs: 2000,
            });
          };
          s.nextGrant = () => next.promise;
          s.grants = grants;
          return s;
        }

        test('a release hands the key to the owner queued first, with a larger token, and tells its store', async () => {
          const key = uniqueKey('grant');
          const a = waiterStore({ handOffAfter: 0 });
          const b = waiterStore();
          assert.equal(b.grantsOnRelease, true);
          await b.listen(key);
          const held = await a.acquire(key, 'A', 10_000);
          const queuedAt = performance.now();
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined, 'held: queued');
          assert.equal(await a.acquire(key, 'C', 10_000), undefined, 'a plain acquire is not queued');
          const granted = b.nextGrant();
          assert.equal(await a.release(key, 'A'), true);
          const grant = await within(2000, 'the grant', granted);
          assert.equal(grant.owner, 'B');
          assert.ok(grant.fencingToken > held.fencingToken, `${grant.fencingToken} > ${held.fencingToken}`);
          assert.ok(grant.age >= 0 && grant.age < performance.now() - queuedAt + 1, `age ${grant.age}`);
          assert.equal(await b.renew(key, 'B', 10_000), true, 'B holds the lease it was handed');
          assert.equal(await a.acquire(key, 'A', 10_000), undefined);
          // B's next try (a message may be lost) answers with the lease it was handed,
          // counted again from that try: B counts it from there, so Redis must too.
          await sleep(300);
          assert.ok((await b.ttl(key)) < 9_800, 'the lease has been running since the grant');
          assert.deepEqual(await b.acquire(key, 'B', 10_000, { queue: true }), { fencingToken: grant.fencingToken });
          assert.ok((await b.ttl(key)) > 9_800, 'counted again from the try that was told of it');
          assert.equal(await b.release(key, 'B'), true);
          assert.equal(await a.isLocked(key), false, 'nobody queued: released');
          assert.equal(b.grants.length, 1);
        });

        test('a grant nobody claims is released, and passes on to the next queued owner', async () => {
          const key = uniqueKey('unclaimed');
          const a = waiterStore({ handOffAfter: 0 });
          const gone = waiterStore();
          const c = waiterStore();
          gone.claims = false; // its waiter gave up
          await gone.listen(key);
          await c.listen(key);
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await gone.acquire(key, 'G', 10_000, { queue: true }), undefined);
          assert.equal(await c.acquire(key, 'C', 10_000, { queue: true }), undefined);
          const granted = c.nextGrant();
          assert.equal(await a.release(key, 'A'), true);
          const grant = await within(2000, "C's grant", granted);
          assert.equal(grant.owner, 'C');
          assert.deepEqual(gone.grants.map((g) => g.owner), ['G'], 'G was offered the key first');
          assert.equal(await c.renew(key, 'C', 10_000), true);
          assert.equal(await c.release(key, 'C'), true);
        });

        test('before the hand-off time the releasing store may take the key again; else the first queued owner gets it', async () => {
          const key = uniqueKey('hand-off');
          const a = waiterStore({ handOffAfter: 60_000 });
          const b = waiterStore();
          await b.listen(key);
          assert.ok(await a.acquire(key, 'A1', 10_000));
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          // Released and taken again in the same turn: B is not woken.
          const releasing = a.release(key, 'A1');
          assert.equal(await releasing, true);
          const again = await a.acquire(key, 'A2', 10_000);
          assert.ok(again, 'the releasing process took the key again');
          await sleep(100);
          assert.equal(b.grants.length, 0, 'no grant while A holds it');
          // Released and not taken again: B is handed the key within a turn or two.
          const granted = b.nextGrant();
          assert.equal(await a.release(key, 'A2'), true);
          const grant = await within(2000, "B's grant after A let go", granted);
          assert.equal(grant.owner, 'B');
          assert.ok(grant.fencingToken > again.fencingToken);
          assert.equal(await b.release(key, 'B'), true);
        });

        test('a store that let the key go to a queued owner hands it over in its next release; taking it again at once brings its turns back', async () => {
          const key = uniqueKey('left');
          const a = waiterStore({ handOffAfter: 60_000 });
          const b = waiterStore();
          await b.listen(key);
          // Asked right after a release resolves, on the same client: Redis answers it
          // before anything the store sends from the event loop's next turn (a WAKE).
          const releaseThenLocked = async (store, owner) => {
            assert.equal(await store.release(key, owner), true);
            return store.isLocked(key);
          };
          const handOver = async (a1, b1) => {
            assert.ok(await a.acquire(key, a1, 10_000));
            assert.equal(await b.acquire(key, b1, 10_000, { queue: true }), undefined, `${b1} queued`);
            const granted = b.nextGrant();
            const lockedAtOnce = await releaseThenLocked(a, a1);
            assert.equal((await within(2000, `${b1}'s grant`, granted)).owner, b1);
            return lockedAtOnce;
          };
          // The turn is A's: its release leaves the key free for A to take again. A does
          // not, and B is woken in the next turn of the event loop.
          assert.equal(await handOver('A1', 'B1'), false, 'free after the first release: A could take it again');
          assert.equal(await b.release(key, 'B1'), true);
          // A let the key go last time: this release hands it to B itself.
          assert.equal(await handOver('A2', 'B2'), true, "handed over in A's release");
          assert.equal(await b.release(key, 'B2'), true);
          // Released that way, then asked for again at once (a loop of executions).
          assert.ok(await a.acquire(key, 'A3', 10_000));
          assert.equal(await b.acquire(key, 'B3', 10_000, { queue: true }), undefined);
          const toB3 = b.nextGrant();
          assert.equal(await a.release(key, 'A3'), true);
          assert.equal(await a.acquire(key, 'A4', 10_000), undefined, 'B3 was handed it');
          assert.equal((await within(2000, "B3's grant", toB3)).owner, 'B3');
          assert.equal(await b.release(key, 'B3'), true);
          // A's turns are back: its release leaves the key free again.
          assert.equal(await handOver('A5', 'B4'), false, 'free after the release: the turn is kept again');
          assert.equal(await b.release(key, 'B4'), true);
          assert.equal(await a.isLocked(key), false);
        });

        test('a queued owner that has waited the hand-off time is handed the key even from a releaser that wants it back', async () => {
          const key = uniqueKey('starving');
          const a = waiterStore({ handOffAfter: 50 });
          const b = waiterStore();
          await b.listen(key);
          assert.ok(await a.acquire(key, 'A1', 10_000));
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          await sleep(80);
          const granted = b.nextGrant();
          assert.equal(await a.release(key, 'A1'), true);
          assert.equal(await a.acquire(key, 'A2', 10_000), undefined, 'handed to B in the release itself');
          assert.equal((await within(2000, "B's grant", granted)).owner, 'B');
          assert.equal(await b.release(key, 'B'), true);
        });

        test('a store handed the key keeps it for the hand-off time while others starve, then hands it on', async () => {
          const key = uniqueKey('slice');
          const a = waiterStore({ handOffAfter: 100 });
          const b = waiterStore({ handOffAfter: 100 });
          const c = waiterStore({ handOffAfter: 100 });
          await b.listen(key);
          await c.listen(key);
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await b.acquire(key, 'B1', 10_000, { queue: true }), undefined);
          assert.equal(await c.acquire(key, 'C', 10_000, { queue: true }), undefined);
          await sleep(150); // B and C have both waited past the hand-off time
          const toB = b.nextGrant();
          assert.equal(await a.release(key, 'A'), true);
          assert.equal((await within(2000, "B's grant", toB)).owner, 'B1', 'first come, first handed');
          // B's slice has just begun: C, though starving, waits while B takes the key again.
          assert.equal(await b.release(key, 'B1'), true);
          const again = await b.acquire(key, 'B2', 10_000, { queue: true });
          assert.ok(again, 'B took the key again within its slice');
          assert.equal(c.grants.length, 0);
          await sleep(150); // B's slice is over
          const toC = c.nextGrant();
          assert.equal(await b.release(key, 'B2'), true);
          assert.equal((await within(2000, "C's grant", toC)).owner, 'C');
          assert.equal(await b.acquire(key, 'B3', 10_000), undefined, 'C holds it now');
          assert.equal(await c.release(key, 'C'), true);
        });

        test('stores trading the key between them within their turns cannot starve a third', async () => {
          const key = uniqueKey('trading');
          const a = waiterStore({ handOffAfter: 50 });
          const b = waiterStore({ handOffAfter: 50 });
          const c = waiterStore({ handOffAfter: 50 });
          await a.listen(key);
          await b.listen(key);
          await c.listen(key);
          let holder = { store: a, owner: 'a0' };
          assert.ok(await a.acquire(key, 'a0', 10_000, { queue: true }));
          assert.equal(await c.acquire(key, 'C', 10_000, { queue: true }), undefined);
          const queuedAt = performance.now();
          // A and B hand the key to each other, each taking it as it comes free (each
          // take starts a new turn), until C is handed it.
          for (let i = 0; c.grants.length === 0 && performance.now() - queuedAt < 2000; i++) {
            await holder.store.release(key, holder.owner);
            const next = holder.store === a ? { store: b, owner: `b${i}` } : { store: a, owner: `a${i}` };
            if (!(await next.store.acquire(key, next.owner, 10_000, { queue: true }))) break;
            holder = next;
          }
          await waitFor("C's grant", async () => c.grants.length === 1, { timeoutMs: 2000 });
          const waited = performance.now() - queuedAt;
          assert.ok(waited < 1000, `C was handed the key after ${Math.round(waited)} ms, not starved`);
          assert.equal(c.grants[0].owner, 'C');
          assert.equal(await c.release(key, 'C'), true);
        });

        test("a grant that reaches the store after the owner's own try took the lease is not released", async () => {
          const key = uniqueKey('raced');
          const a = waiterStore({ handOffAfter: 0 });
          const bClient = await newClient();
          const gate = gateMessages(bClient);
          const b = waiterStore({ client: bClient });
          const c = waiterStore();
          await b.listen(key);
          await c.listen(key);
          // Nobody claims B's grant: its waiter holds the lease through its own try and
          // has stopped listening when the message comes.
          b.claims = false;
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          assert.equal(await c.acquire(key, 'C', 10_000, { queue: true }), undefined);
          gate.hold();
          assert.equal(await a.release(key, 'A'), true, 'handed to B');
          const mine = await b.acquire(key, 'B', 10_000, { queue: true });
          assert.ok(mine, "B's try finds the lease handed to it");
          const offered = b.nextGrant();
          await waitFor('the grant message', async () => gate.held() > 0, { timeoutMs: 2000 });
          gate.deliver();
          const grant = await within(2000, "B's grant, offered", offered);
          assert.equal(grant.fencingToken, mine.fencingToken);
          // A release of the grant would go out on B's connection before this renew.
          assert.equal(await b.renew(key, 'B', 10_000), true, 'B still holds the lease');
          assert.equal(c.grants.length, 0, 'C was not handed the key while B holds it');
          assert.equal(await b.release(key, 'B'), true);
          const toC = await within(2000, "C's grant", c.nextGrant());
          assert.equal(toC.owner, 'C');
          assert.ok(toC.fencingToken > mine.fencingToken);
          assert.equal(await c.release(key, 'C'), true);
        });

        test('close() wakes the owner queued for a key it released, before the caller closes its client', async () => {
          const key = uniqueKey('close-wake');
          const own = await newClient();
          const a = newStore({ client: own, prefix: `${prefix}-grant`, handOffAfter: 60_000 });
          // The server has not run WAKE yet: sent by its digest, it would be retried with
          // its source after a NOSCRIPT answer, too late, once the client is closed.
          await call(server.port, ['SCRIPT', 'FLUSH']);
          const b = waiterStore();
          await b.listen(key);
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          const granted = b.nextGrant();
          // Released within A's turn: the key is left for A to take again before the event
          // loop's next turn, when B would be woken. But A's process is done with it: it
          // closes the store, then its client, at once (as a process does on its way out).
          assert.equal(await a.release(key, 'A'), true);
          await a.close();
          // ioredis writes a command as it is sent, so even a forced disconnect sends it;
          // node-redis writes on a later tick, so a caller must quit (gracefully) for
          // commands sent before to go out.
          if (kind.name === 'node-redis') await own.quit();
          else await kind.close(own);
          assert.equal((await within(2000, "B's grant", granted)).owner, 'B');
          assert.equal(await b.release(key, 'B'), true);
        });

        test('a queued owner whose store closed, or whose channel nobody hears, is skipped', async () => {
          const key = uniqueKey('unheard');
          const a = waiterStore({ handOffAfter: 0 });
          const closing = waiterStore();
          const c = waiterStore();
          await closing.listen(key);
          await c.listen(key);
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await closing.acquire(key, 'D', 10_000, { queue: true }), undefined);
          // An owner queued by a process that is gone: its channel has no subscriber.
          const names = { queue: `${prefix}-grant:{${key}}:queue`, waiters: `${prefix}-grant:{${key}}:waiters` };
          await call(server.port, ['RPUSH', names.queue, 'ghost']);
          await call(server.port, ['HSET', names.waiters, 'ghost', `${Date.now() + 60_000} 10000 0 ${prefix}-grant:grants:gone`]);
          assert.equal(await c.acquire(key, 'C', 10_000, { queue: true }), undefined);
          await closing.close();
          await waitFor("close() to take D's owner out", async () => {
            const queued = await call(server.port, ['LRANGE', names.queue, 0, -1]);
            return queued.join() === 'ghost,C';
          }, { timeoutMs: 2000 });
          const granted = c.nextGrant();
          assert.equal(await a.release(key, 'A'), true);
          assert.equal((await within(2000, "C's grant", granted)).owner, 'C', 'the ghost was skipped');
          assert.equal(await c.release(key, 'C'), true);
          assert.equal(await a.isLocked(key), false);
        });

        /** The owners queued on `key`, as Redis has them. */
        const queuedOn = (key) => call(server.port, ['LRANGE', `${prefix}-grant:{${key}}:queue`, 0, -1]);
        /** Ids of the server's pubsub connections. */
        const pubsubIds = async () =>
          (await call(server.port, ['CLIENT', 'LIST', 'TYPE', 'pubsub'])).match(/(?<=^id=)\d+/gm) ?? [];

        /**
         * A waiter store on a client of its own that does not reconnect (`prepare` may wrap
         * that client first), listening on `key`; resolves to it with the id of its
         * subscriber connection.
         */
        async function storeWithoutReconnect(key, prepare = () => {}) {
          const once = await kind.connectWithoutReconnect(server.port);
          clients.push(once);
          prepare(once);
          const s = waiterStore({ client: once });
          const others = await pubsubIds();
          await s.listen(key);
          const mine = (await pubsubIds()).filter((id) => !others.includes(id));
          assert.equal(mine.length, 1, 'its subscriber connection');
          return { store: s, subscriberId: mine[0] };
        }

        test('a subscriber connection that ends for good (no reconnects): its owners leave the queue, and the next waiter opens a new one', async () => {
          const key = uniqueKey('sub-ends');
          const queued = () => queuedOn(key);
          const a = waiterStore({ handOffAfter: 0 });
          const { store: b, subscriberId } = await storeWithoutReconnect(key);
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          assert.deepEqual(await queued(), ['B']);

          // The server drops b's subscriber; its client does not reconnect. No grant can
          // reach b's owners now: they leave the queue, and b queues no more of them.
          await call(server.port, ['CLIENT', 'KILL', 'ID', subscriberId]);
          await waitFor("B out of the queue", async () => (await queued()).length === 0, { timeoutMs: 2000 });
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          assert.deepEqual(await queued(), [], 'not queued for a channel nobody hears');

          // The next waiter opens a new subscriber connection, and grants reach b again.
          await b.listen(key);
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          assert.deepEqual(await queued(), ['B']);
          const granted = b.nextGrant();
          assert.equal(await a.release(key, 'A'), true);
          assert.equal((await within(2000, "B's grant", granted)).owner, 'B');
          assert.equal(await b.release(key, 'B'), true);
        });

        test('a queueing try answered after its subscriber connection ended for good leaves no owner queued', async () => {
          const key = uniqueKey('sub-ends-in-flight');
          const queued = () => queuedOn(key);
          const a = waiterStore({ handOffAfter: 0 });
          // Once `held` is set, the next script answer waits for `held.resolve()`.
          let held;
          const { store: b, subscriberId } = await storeWithoutReconnect(key, (once) => {
            for (const name of ['evalsha', 'evalSha']) {
              if (typeof once[name] !== 'function') continue;
              const send = once[name].bind(once);
              once[name] = async (...args) => {
                const gate = held;
                held = undefined;
                const reply = await send(...args);
                if (gate) await gate.promise;
                return reply;
              };
            }
          });
          assert.ok(await a.acquire(key, 'A', 10_000));
          const probe = uniqueKey('sub-ends-probe');
          assert.ok(await a.acquire(probe, 'A', 10_000));
          const answer = (held = deferred());
          const trying = b.acquire(key, 'B', 10_000, { queue: true });
          await waitFor('B queued in Redis', async () => (await queued()).join() === 'B', { timeoutMs: 2000 });
          await call(server.port, ['CLIENT', 'KILL', 'ID', subscriberId]);
          // Until the store has dropped the connection, its tries still queue their owners.
          await waitFor('the store to stop queueing', async () => {
            assert.equal(await b.acquire(probe, 'P', 10_000, { queue: true }), undefined);
            const probeQueue = await queuedOn(probe);
            await b.release(probe, 'P'); // (not its lease: takes nothing, answers false)
            await call(server.port, ['DEL', `${prefix}-grant:{${probe}}:queue`, `${prefix}-grant:{${probe}}:waiters`]);
            return probeQueue.length === 0;
          }, { timeoutMs: 2000 });
          answer.resolve();
          assert.equal(await trying, undefined, 'held: not granted');
          await waitFor('B out of the queue', async () => (await queued()).length === 0, { timeoutMs: 2000 });
          assert.equal(await a.release(key, 'A'), true);
          assert.equal(await a.isLocked(key), false, 'released, not handed to an owner nobody hears');
          assert.equal(await a.release(probe, 'A'), true);
        });

        test('an owner that took the key without queueing is not handed it back by its own release', async () => {
          const key = uniqueKey('self');
          const a = waiterStore({ handOffAfter: 60_000 });
          const b = waiterStore({ handOffAfter: 60_000 });
          await b.listen(key);
          assert.ok(await a.acquire(key, 'A', 10_000));
          assert.equal(await b.acquire(key, 'B', 10_000, { queue: true }), undefined);
          assert.equal(await a.release(key, 'A'), true);
          const plain = await b.acquire(key, 'B', 10_000);
          if (plain === undefined) {
            // A's release was followed by a wake that handed the key to B already.
            await waitFor('the grant', async () => b.grants.some((g) => g.owner === 'B'), { timeoutMs: 2000 });
          }
          assert.equal(await b.release(key, 'B'), true);
          await sleep(50);
          assert.equal(await a.isLocked(key), false, "B's release freed the key: it was not handed back to B");
        });

        test('bad options are refused, naming them', async () => {
          assert.throws(() => newStore({ client, handOffAfter: -1 }), { name: 'RangeError', message: /handOffAfter/ });
          assert.throws(() => newStore({ client, handOffAfter: '5' }), { name: 'RangeError', message: /handOffAfter/ });
          await assert.rejects(store.acquire('k', 'o', 1000, 'queue'), { name: 'TypeError', message: /options/ });
          await assert.rejects(store.acquire('k', 'o', 1000, { queue: 1 }), { name: 'TypeError', message: /options/ });
        });
      });

      test('restart without persistence: the old lease is gone for its owner, new tokens are larger', async () => {
        const key = uniqueKey('restart');
        const busy = uniqueKey('restart-busy');
        const tokens = [];
        for (let i = 0; i < 10; i++) {
          tokens.push((await store.acquire(busy, `b${i}`, 10_000)).fencingToken);
          assert.ok(await store.release(busy, `b${i}`));
        }
        const held = await store.acquire(key, 'old', 30_000);
        tokens.push(held.fencingToken);
        const heldBusy = await store.acquire(busy, 'old', 30_000);
        tokens.push(heldBusy.fencingToken);
        // a subscriber whose connection the restart breaks: it must not crash the
        // process (an 'error' event without a listener would), and its client
        // resubscribes once reconnected
        const sub = newStore({ client, prefix });
        let announced = deferred();
        sub.subscribe(key, () => announced.resolve());
        const pattern = `${prefix}:*`;
        await waitFor('the subscription', async () => (await subscriberCount([server.port], pattern)) === 1, { timeoutMs: 2000 });

        await server.restart();
        assert.equal(await call(server.port, ['DBSIZE']), 0, 'the restarted server has no data');
        await waitFor(
          'the client to reconnect',
          async () => (await within(1000, 'isLocked', store.isLocked(key))) === false,
          { timeoutMs: 10_000, intervalMs: 50 },
        );

        assert.equal(await store.renew(key, 'old', 30_000), false, 'the old owner has lost the lease');
        assert.equal(await store.release(key, 'old'), false);
        const maxBefore = Math.max(...tokens);
        const next = await store.acquire(key, 'new', 30_000);
        assert.ok(next.fencingToken > maxBefore, `${next.fencingToken} > ${maxBefore}`);
        const nextBusy = await store.acquire(busy, 'new', 30_000);
        assert.ok(nextBusy.fencingToken > maxBefore, `${nextBusy.fencingToken} > ${maxBefore}`);
        assert.equal(await store.release(busy, 'new'), true);

        await waitFor('the resubscription', async () => (await subscriberCount([server.port], pattern)) === 1, { timeoutMs: 5000 });
        announced = deferred();
        assert.equal(await store.release(key, 'new'), true);
        await within(2000, 'the announcement after a restart', announced.promise);
        await sub.close();
      });
    });
  }
});

// ---------------------------------------------------------------------------------
// Redis Cluster
// ---------------------------------------------------------------------------------

describe('Redis Cluster, 3 masters', () => {
  const prefix = 'cl';
  let cluster;
  /** one lock key per master: [{ key, port }] */
  let spread;

  before(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    const byPort = new Map();
    for (let i = 0; byPort.size < cluster.ports.length; i++) {
      assert.ok(i < 1000, 'keys on every master');
      const key = `job-${i}`;
      const port = await cluster.nodeFor(leaseName(prefix, key));
      if (!byPort.has(port)) byPort.set(port, key);
    }
    spread = [...byPort].map(([port, key]) => ({ key, port }));
  });
  after(async () => {
    await cluster?.stop();
  });

  for (const kind of KINDS) {
    describe(`through ${kind.name}`, () => {
      let client;
      let store;
      const extra = [];
      before(async () => {
        client = await kind.connectCluster(cluster.nodes);
        store = new RedisLockStore({ client, prefix });
      });
      after(async () => {
        await Promise.allSettled([store?.close(), ...extra.map((s) => s.close())]);
        await Promise.allSettled([client, ...extra.map((s) => s.client)].filter(Boolean).map((c) => kind.close(c)));
      });

      test('acquire, renew, release and tokens for keys on every master', async () => {
        assert.equal(spread.length, 3);
        for (const { key, port } of spread) {
          const k = `${key}`;
          const first = await store.acquire(k, 'A', 10_000);
          assert.ok(first, `acquire ${k}`);
          assert.equal(await call(port, ['EXISTS', leaseName(prefix, k), `${leaseName(prefix, k)}:token`]), 2, `both names live on the master on ${port}`);
          assert.equal(await store.acquire(k, 'B', 10_000), undefined);
          assert.equal(await store.isLocked(k), true);
          assert.ok((await store.ttl(k)) > 9000);
          assert.equal(await store.renew(k, 'B', 10_000), false);
          assert.equal(await store.renew(k, 'A', 10_000), true);
          assert.equal(await store.release(k, 'B'), false);
          assert.equal(await store.release(k, 'A'), true);
          assert.equal(await store.isLocked(k), false);
          const second = await store.acquire(k, 'B', 50);
          assert.ok(second.fencingToken > first.fencingToken);
          await waitFor('expiry', async () => !(await store.isLocked(k)), { timeoutMs: 2000, intervalMs: 10 });
          const third = await store.acquire(k, 'C', 10_000);
          assert.ok(third.fencingToken > second.fencingToken);
          assert.equal(await store.release(k, 'C'), true);
        }
      });

      test('awkward keys keep lease and token in one slot (no CROSSSLOT)', async () => {
        const s = new RedisLockStore({ client, prefix: `${prefix}-awkward` });
        for (const [i, key] of AWKWARD_KEYS.entries()) {
          assert.ok(await s.acquire(key, `o${i}`, 10_000), JSON.stringify(key));
        }
        for (const [i, key] of AWKWARD_KEYS.entries()) {
          assert.equal(await s.renew(key, `o${i}`, 10_000), true, JSON.stringify(key));
          assert.equal(await s.release(key, `o${i}`), true, JSON.stringify(key));
        }
      });

      test('NOSCRIPT on a node: scripts flushed everywhere, operations still work', async () => {
        for (const port of cluster.ports) await call(port, ['SCRIPT', 'FLUSH']);
        for (const { key } of spread) {
          assert.ok(await store.acquire(key, 'A', 10_000));
          assert.equal(await store.renew(key, 'A', 10_000), true);
          assert.equal(await store.release(key, 'A'), true);
        }
      });

      test('a release on any master reaches a subscriber', async () => {
        const subClient = await kind.connectCluster(cluster.nodes);
        const sub = new RedisLockStore({ client: subClient, prefix });
        extra.push(Object.assign(sub, { client: subClient }));
        const seen = new Map(spread.map(({ key }) => [key, deferred()]));
        const offs = spread.map(({ key }) => sub.subscribe(key, () => seen.get(key).resolve()));
        await waitFor(
          'the subscriptions',
          async () => (await subscriberCount(cluster.ports, `${prefix}:*`)) === spread.length,
          { timeoutMs: 5000 },
        );
        for (const { key } of spread) {
          assert.ok(await store.acquire(key, 'A', 10_000));
          assert.equal(await store.release(key, 'A'), true);
          await within(2000, `the announcement for ${key}`, seen.get(key).promise);
        }
        for (const off of offs) off();
        await waitFor(
          'the unsubscriptions',
          async () => (await subscriberCount(cluster.ports, `${prefix}:*`)) === 0,
          { timeoutMs: 5000 },
        );
      });
    });
  }
});
