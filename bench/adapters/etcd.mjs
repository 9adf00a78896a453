// etcd locks, one factory per library, all on the same kind of `etcd3` client (one
// `Etcd3` per process, loopback), each used the way its README shows.
//
// `createEtcdLock(name, { client, ttlMs, waitMs })` resolves to `{ run(key, fn), close() }`.
// `fn` gets `{ token }`: the fencing token where the library has one (leasehold only).
//
// - etcd3-lock: `client.lock(key).ttl(seconds).do(fn)`, etcd3's own mutex: a lease
//   (granted, then kept alive on a stream of its own), a put if the key does not exist,
//   and a revoke on release. It does not wait: a held key rejects with
//   EtcdLockFailedError, and this adapter tries again every 10 ms (redis-semaphore's
//   default pace) until `waitMs`.
// - leasehold-native / leasehold-wasm: a pipeline with an EtcdLockStore; waiters queue
//   under the key's prefix and are handed the lock by a watch (etcd's
//   concurrency.Mutex layout); renews every ttl/3.

import { EtcdLockFailedError } from 'etcd3';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const ETCD_LIBS = ['etcd3-lock', 'leasehold-native', 'leasehold-wasm'];

function etcd3Lock({ client, ttlMs, waitMs }) {
  const seconds = Math.max(1, Math.ceil(ttlMs / 1000));
  return {
    async run(key, fn) {
      const deadline = Date.now() + waitMs;
      for (;;) {
        try {
          return await client.lock(key).ttl(seconds).do(() => fn({ token: undefined }));
        } catch (error) {
          if (!(error instanceof EtcdLockFailedError) || Date.now() >= deadline) throw error;
        }
        await sleep(10);
      }
    },
    async close() {},
  };
}

async function leaseholdLock({ client, ttlMs, waitMs }, engine) {
  if ((process.env.LEASEHOLD_ENGINE ?? '') !== engine) {
    throw new Error(`leasehold-${engine} needs LEASEHOLD_ENGINE=${engine} before import`);
  }
  const api = (await import('../../lib/entries/index.mjs')).default;
  if (api.engine !== engine) throw new Error(`asked for the ${engine} engine, got ${api.engine}`);
  const { EtcdLockStore } = await import('../../lib/stores/etcd/index.mjs');
  const store = new EtcdLockStore({ client, prefix: 'bench' });
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ ttl: ttlMs, wait: waitMs, store }).build();
  return {
    run: (key, fn) => pipeline.execute(() => fn({ token: api.getLockToken() }), { operationKey: key }),
    close: () => store.close(),
  };
}

export async function createEtcdLock(name, options) {
  switch (name) {
    case 'etcd3-lock':
      return etcd3Lock(options);
    case 'leasehold-native':
      return leaseholdLock(options, 'native');
    case 'leasehold-wasm':
      return leaseholdLock(options, 'wasm');
    default:
      throw new Error(`unknown etcd library ${name}`);
  }
}
