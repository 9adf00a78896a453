// A separate Node process on an EtcdLockStore taking permits through the real engine
// (js-tests/etcd-permits.test.mjs).
//   node etcd-permits-worker.mjs <endpoints,comma-separated> run <key> <limit> <weight> <lanes> <count>
//     prints {"ready":true}, starts on a line on stdin, then runs `lanes` executions at a
//     time, `count` each, of a pipeline with `limit`/`weight`. Inside, it puts a key of
//     its own under `${key}-inside/` (its weight as value) and reads them all: the
//     weights it sees summed (every execution inside at once is seen by the last to
//     come in), then deletes its key. Prints {"completed","max","tokens","errors"}.
//   node etcd-permits-worker.mjs <endpoints> hold <key> <limit> <weight> <ttlMs>
//     takes a permit (renewed), prints {"held":token}, and holds it until killed.

import { Etcd3 } from 'etcd3';
import { ResiliencePipelineBuilder, acquireLock, getLockToken } from 'leasehold';
import { EtcdLockStore } from 'leasehold/etcd';
import { readyThenGo } from './fleet.mjs';

const [endpoints, mode, key, limitText, weightText, ...rest] = process.argv.slice(2);
const limit = Number(limitText);
const weight = Number(weightText);
const client = new Etcd3({ hosts: endpoints.split(',') });
const store = new EtcdLockStore({ client });
const print = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

if (mode === 'hold') {
  const held = await acquireLock(store, key, Number(rest[0]), { wait: 30_000, autoRenew: true, limit, weight });
  print({ held: held.fencingToken });
  setInterval(() => {}, 1_000); // hold until killed
} else if (mode === 'run') {
  const [lanes, count] = rest.map(Number);
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '60s', limit, weight }).build();
  await readyThenGo({});
  let max = 0;
  const tokens = [];
  const errors = [];
  let completed = 0;
  const lane = async (l) => {
    for (let i = 0; i < count; i++) {
      try {
        await pipeline.execute(async () => {
          tokens.push(getLockToken());
          const mine = `${key}-inside/${process.pid}.${l}.${i}`;
          await client.put(mine).value(String(weight));
          const inside = await client.getAll().prefix(`${key}-inside/`).strings();
          const sum = Object.values(inside).reduce((a, v) => a + Number(v), 0);
          if (sum > max) max = sum;
          await client.delete().key(mine);
        });
        completed += 1;
      } catch (error) {
        errors.push(`${error?.name}: ${error?.message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, l) => lane(l)));
  await store.close();
  client.close();
  print({ completed, max, tokens, errors });
} else {
  throw new Error(`unknown mode ${mode}`);
}
