// A separate Node process on an EtcdLockStore, for the tests that need a process to
// die or to exit (etcd-store.test.mjs, etcd-cluster.test.mjs).
//   node etcd-worker.mjs <endpoints,comma-separated> <mode> <key> [ttlMs]
// modes:
//   hold     takes the key (wait 10 s, renewed), prints {"held":token}, then holds it until killed
//   wait     prints {"ready":true} once its try found the key held (it is queued), then
//            prints {"held":token} when it gets the key, and holds it until killed
//   idle     takes and releases the key once, waits while another holds it until its
//            signal aborts, then closes the client and prints {"done":true}: the
//            process must then exit on its own (nothing of the store's keeps it alive)

import { Etcd3 } from 'etcd3';
import { acquireLock } from 'leasehold';
import { EtcdLockStore } from 'leasehold/etcd';

const [endpoints, mode, key, ttlArg] = process.argv.slice(2);
const ttl = Number(ttlArg ?? 3_000);
const client = new Etcd3({ hosts: endpoints.split(',') });
const store = new EtcdLockStore({ client });
const print = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

if (mode === 'hold' || mode === 'wait') {
  if (mode === 'wait') {
    // Queued once this store's own try has answered "held": the key under the prefix is ours.
    const before = Date.now();
    const lease = acquireLock(store, key, ttl, { wait: 60_000, autoRenew: true });
    const timer = setInterval(async () => {
      const all = await client.getAll().prefix(`leasehold/${key}/`).strings();
      if (Object.values(all).length >= 2) {
        clearInterval(timer);
        print({ ready: true, queuedAfterMs: Date.now() - before });
      }
    }, 20);
    const held = await lease;
    clearInterval(timer);
    print({ held: held.fencingToken });
  } else {
    const held = await acquireLock(store, key, ttl, { wait: 10_000, autoRenew: true });
    print({ held: held.fencingToken });
  }
  setInterval(() => {}, 1_000); // hold until killed
} else if (mode === 'idle') {
  const first = await acquireLock(store, key, ttl, { wait: 10_000 });
  await first.release();
  print({ ready: true });
  // The test holds `${key}-busy` meanwhile: this waits (queued, watching) until aborted.
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 500);
  await acquireLock(store, `${key}-busy`, ttl, { wait: 60_000, signal: controller.signal }).catch(() => undefined);
  client.close();
  print({ done: true });
} else {
  throw new Error(`unknown mode ${mode}`);
}
