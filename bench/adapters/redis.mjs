// Redis locks, one factory per library, all on the same kind of ioredis client
// (support/redis-client.mjs), each used the way its README shows.
//
// `createRedisLock(name, { client, ttlMs, waitMs, onLost })` resolves to
// `{ run(key, fn), close() }`, and optionally `idle()`: resolves once nothing of the
// lock's is left to send (leasehold with linger). `fn` gets `{ token }`: the fencing token where the
// library has one (leasehold only), else undefined. `onLost()` is called when the
// library tells the holder that its lock is gone, if it ever does.
//
// Waiting (waitMs > 0) is each library's own mechanism, with its default pace:
// - floor: SET key owner NX PX ttl, then EVALSHA compare-and-delete; polls every 10 ms.
// - redlock (@sesamecare-oss/redlock, the maintained redlock v5): `using()`, which
//   extends the lock automatically (500 ms before expiry) and aborts its signal when an
//   extension fails; retries every 200 ± 100 ms.
// - redis-semaphore: `new Mutex(client, key)`, acquire/release; refreshes at 0.8 × ttl
//   and calls `onLockLost` when a refresh fails; retries every 10 ms.
// - verrou (@verrou/core, redis store): `createLock(key, ttl).run(fn)`; no renewal, no
//   loss signal; retries every 250 ms.
// - leasehold-native / leasehold-wasm: a pipeline with a RedisLockStore; renews every
//   ttl/3; waiters are queued in Redis and processes take 10 ms turns: a release hands
//   the key to the first waiter once it has waited 10 ms and the releasing process has
//   had the key 10 ms (else the releasing process may take it again, and the first
//   waiter gets it if it does not). Within its turn a process passes the lease between
//   its own executions with no Redis call. leasehold-native-fifo (scenario 5): the same
//   with handOffAfter: 0, every release hands over in arrival order.
//   leasehold-<engine>-linger (scenarios 4 and 5): with `linger: 10` (the turn), a
//   released lease stays in the process for its next execution.
//   leasehold-native-replicas (scenario 4r): with `minReplicas: 1`, on a primary with a
//   replica.
// - floor-fifo (scenario 5 only, not a lock to use): a list holding the key's one token;
//   acquire is BLPOP, which Redis answers for the longest-blocked client as soon as the
//   release RPUSHes the token back. No ttl, no owner, no polling, no script: the least a
//   handover between processes in arrival order can cost on Redis.

import { randomUUID } from 'node:crypto';

export const REDIS_LIBS = ['floor', 'redlock', 'redis-semaphore', 'verrou', 'leasehold-native', 'leasehold-wasm'];

const COMPARE_AND_DELETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function floorLock({ client, ttlMs, waitMs }) {
  const sha = await client.script('LOAD', COMPARE_AND_DELETE);
  const prefix = `${process.pid}:${randomUUID()}:`;
  let serial = 0;
  return {
    async run(key, fn) {
      const owner = prefix + ++serial;
      const deadline = Date.now() + waitMs;
      while ((await client.set(key, owner, 'PX', ttlMs, 'NX')) !== 'OK') {
        if (Date.now() >= deadline) throw new Error('floor: lock not acquired');
        await sleep(10);
      }
      try {
        return await fn({ token: undefined });
      } finally {
        await client.evalsha(sha, 1, key, owner);
      }
    },
    async close() {},
  };
}

async function floorFifoLock({ client, waitMs }) {
  // BLPOP with a timeout of 0 blocks forever: this floor only waits.
  if (!(waitMs > 0)) throw new Error('floor-fifo only waits: waitMs must be positive');
  const started = new Set();
  return {
    async run(key, fn) {
      const tokens = `${key}:fifo-token`;
      if (!started.has(key)) {
        // The first process to come puts the key's one token in.
        if ((await client.set(`${key}:fifo-started`, '1', 'NX')) === 'OK') await client.rpush(tokens, '1');
        started.add(key);
      }
      if ((await client.blpop(tokens, waitMs / 1000)) === null) throw new Error('floor-fifo: lock not acquired');
      try {
        return await fn({ token: undefined });
      } finally {
        await client.rpush(tokens, '1');
      }
    },
    async close() {},
  };
}

async function redlockLock({ client, ttlMs, waitMs, onLost }) {
  const { Redlock } = await import('@sesamecare-oss/redlock');
  // retryCount -1 retries without limit (we bound the wait ourselves); 0 fails fast.
  const redlock = new Redlock([client], { retryCount: waitMs > 0 ? -1 : 0 });
  return {
    run(key, fn) {
      return redlock.using([key], ttlMs, async (signal) => {
        if (onLost) signal.addEventListener('abort', () => onLost(), { once: true });
        return fn({ token: undefined });
      });
    },
    async close() {},
  };
}

async function redisSemaphoreLock({ client, ttlMs, waitMs, onLost }) {
  const { Mutex } = await import('redis-semaphore');
  return {
    async run(key, fn) {
      const mutex = new Mutex(client, key, {
        lockTimeout: ttlMs,
        // With no wait: one attempt (its loop checks the clock before trying, so the
        // timeout itself must leave room for that attempt).
        acquireTimeout: waitMs > 0 ? waitMs : ttlMs,
        acquireAttemptsLimit: waitMs > 0 ? Number.POSITIVE_INFINITY : 1,
        onLockLost: () => onLost?.(),
      });
      await mutex.acquire();
      try {
        return await fn({ token: undefined });
      } finally {
        await mutex.release();
      }
    },
    async close() {},
  };
}

async function verrouLock({ client, ttlMs, waitMs }) {
  const { Verrou } = await import('@verrou/core');
  const { redisStore } = await import('@verrou/core/drivers/redis');
  const verrou = new Verrou({ default: 'redis', stores: { redis: { driver: redisStore({ connection: client }) } } });
  return {
    async run(key, fn) {
      const lock = verrou.createLock(key, ttlMs);
      const [acquired, value] =
        waitMs > 0 ? await lock.run(() => fn({ token: undefined })) : await lock.runImmediately(() => fn({ token: undefined }));
      if (!acquired) throw new Error('verrou: lock not acquired');
      return value;
    },
    async close() {},
  };
}

async function leaseholdLock({ client, ttlMs, waitMs, onLost }, engine, storeOptions = {}, lockOptions = {}) {
  if ((process.env.LEASEHOLD_ENGINE ?? '') !== engine) {
    throw new Error(`leasehold-${engine} needs LEASEHOLD_ENGINE=${engine} before import`);
  }
  const api = (await import('../../lib/entries/index.mjs')).default;
  if (api.engine !== engine) throw new Error(`asked for the ${engine} engine, got ${api.engine}`);
  const { RedisLockStore } = await import('../../lib/stores/redis/index.mjs');
  const store = new RedisLockStore({ client, prefix: 'bench', ...storeOptions });
  const pipeline = new api.ResiliencePipelineBuilder()
    .addLock({ ttl: ttlMs, wait: waitMs, store, onLockLost: onLost ? () => onLost() : undefined, ...lockOptions })
    .build();
  return {
    run: (key, fn) => pipeline.execute(() => fn({ token: api.getLockToken() }), { operationKey: key }),
    // Until a lingering lease is released: a client that closes (or blocks its
    // connection, as BLPOP does) before that keeps the key held until its ttl.
    idle: () => (lockOptions.linger ? sleep(lockOptions.linger + 20) : undefined),
    close: async () => {
      if (lockOptions.linger) await sleep(lockOptions.linger + 20);
      await store.close();
    },
  };
}

export async function createRedisLock(name, options) {
  switch (name) {
    case 'floor':
      return floorLock(options);
    case 'floor-fifo':
      return floorFifoLock(options);
    case 'redlock':
      return redlockLock(options);
    case 'redis-semaphore':
      return redisSemaphoreLock(options);
    case 'verrou':
      return verrouLock(options);
    case 'leasehold-native':
      return leaseholdLock(options, 'native');
    case 'leasehold-wasm':
      return leaseholdLock(options, 'wasm');
    case 'leasehold-native-fifo':
      return leaseholdLock(options, 'native', { handOffAfter: 0 });
    case 'leasehold-native-replicas':
      return leaseholdLock(options, 'native', { minReplicas: 1 });
    case 'leasehold-native-linger':
      return leaseholdLock(options, 'native', {}, { linger: 10 });
    case 'leasehold-wasm-linger':
      return leaseholdLock(options, 'wasm', {}, { linger: 10 });
    default:
      throw new Error(`unknown Redis library ${name}`);
  }
}
