// Semaphores for scenario 8 (permits), one factory per library, each used the way its
// README shows, each in its fastest build (bench/permits.mjs reports the file each ran).
//
// In memory, `createMemorySemaphore(name, { key, limit, ttlMs })` resolves to
// `run(fn)`, which runs `fn` holding one of `limit` permits of `key`:
// - async-sema: `new Sema(limit)`, `acquire()`/`release()` around the call. CommonJS only.
// - henrygd-semaphore: `getSemaphore(key, limit)`, fetched once and kept (its map drops an
//   idle key; the kept object still works), `acquire()`/`release()` around the call.
// - async-mutex: `new Semaphore(limit)`, `runExclusive(fn)`, loaded with `require`: its
//   CommonJS build (lib/) runs this scenario about 3× faster than the one `import` gets
//   (index.mjs), and `runExclusive` beats `acquire()` + the releaser it returns.
// - leasehold-<engine>: a pipeline with `addLock({ key, limit, wait: Infinity })` on the
//   default MemoryLockStore; `-withlock`: `withLock(key, fn, { limit, wait: Infinity })`.
//
// On Redis, `createRedisSemaphore(name, { client, limit, ttlMs, waitMs })` resolves to
// `{ run(key, fn), close() }`:
// - redis-semaphore: `new Semaphore(client, key, limit, { lockTimeout, acquireTimeout })`
//   per execution, acquire/release; retries every 10 ms (its default), refreshes at
//   0.8 × ttl.
// - leasehold-<engine>: a pipeline with a RedisLockStore and `addLock({ ttl, wait,
//   store, limit })`, the key as `operationKey`.

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const MEMORY_PERMIT_LIBS = ['async-sema', 'henrygd-semaphore', 'async-mutex', 'leasehold-native', 'leasehold-wasm', 'leasehold-native-withlock', 'leasehold-wasm-withlock'];
export const REDIS_PERMIT_LIBS = ['redis-semaphore', 'leasehold-native', 'leasehold-wasm'];

/** The file a peer's module resolves to, as this adapter loads it, relative to node_modules. */
export function builds() {
  const rel = (file) => file.slice(file.lastIndexOf('node_modules/') + 'node_modules/'.length);
  const viaImport = (name) => rel(new URL(import.meta.resolve(name)).pathname);
  return {
    'async-sema': `require: ${rel(require.resolve('async-sema'))}`,
    'henrygd-semaphore': `import: ${viaImport('@henrygd/semaphore')}`,
    'async-mutex': `require: ${rel(require.resolve('async-mutex'))}`,
    'redis-semaphore': `import: ${viaImport('redis-semaphore')}`,
  };
}

async function leaseholdApi(engine) {
  if ((process.env.LEASEHOLD_ENGINE ?? '') !== engine) {
    throw new Error(`leasehold-${engine} needs LEASEHOLD_ENGINE=${engine} before import`);
  }
  const api = (await import('../../lib/entries/index.mjs')).default;
  if (api.engine !== engine) throw new Error(`asked for the ${engine} engine, got ${api.engine}`);
  return api;
}

export async function createMemorySemaphore(name, { key, limit, ttlMs = 30_000 }) {
  switch (name) {
    case 'async-sema': {
      const { Sema } = require('async-sema');
      const sema = new Sema(limit);
      return async (fn) => {
        await sema.acquire();
        try {
          return await fn();
        } finally {
          sema.release();
        }
      };
    }
    case 'henrygd-semaphore': {
      const { getSemaphore } = await import('@henrygd/semaphore');
      const semaphore = getSemaphore(key, limit);
      return async (fn) => {
        await semaphore.acquire();
        try {
          return await fn();
        } finally {
          semaphore.release();
        }
      };
    }
    case 'async-mutex': {
      const { Semaphore } = require('async-mutex');
      const semaphore = new Semaphore(limit);
      return (fn) => semaphore.runExclusive(fn);
    }
    default: {
      const [, engine, form] = name.split('-');
      if (!name.startsWith('leasehold-') || !['native', 'wasm'].includes(engine) || ![undefined, 'withlock'].includes(form)) {
        throw new Error(`unknown memory library ${name}`);
      }
      const api = await leaseholdApi(engine);
      if (form === 'withlock') return (fn) => api.withLock(key, fn, { limit, wait: Infinity });
      const pipeline = new api.ResiliencePipelineBuilder().addLock({ key, limit, ttl: ttlMs, wait: Infinity }).build();
      return (fn) => pipeline.execute(fn);
    }
  }
}

export async function createRedisSemaphore(name, { client, limit, ttlMs, waitMs }) {
  if (name === 'redis-semaphore') {
    const { Semaphore } = await import('redis-semaphore');
    return {
      async run(key, fn) {
        const semaphore = new Semaphore(client, key, limit, { lockTimeout: ttlMs, acquireTimeout: waitMs });
        await semaphore.acquire();
        try {
          return await fn();
        } finally {
          await semaphore.release();
        }
      },
      async close() {},
    };
  }
  const engine = name.split('-')[1];
  if (!['leasehold-native', 'leasehold-wasm'].includes(name)) throw new Error(`unknown Redis library ${name}`);
  const api = await leaseholdApi(engine);
  const { RedisLockStore } = await import('../../lib/stores/redis/index.mjs');
  const store = new RedisLockStore({ client, prefix: 'bench' });
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ ttl: ttlMs, wait: waitMs, store, limit }).build();
  return {
    run: (key, fn) => pipeline.execute(fn, { operationKey: key }),
    close: () => store.close(),
  };
}
