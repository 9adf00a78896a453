// One process of the Redis failover tests (redis-sentinel.test.mjs, redis-cluster-
// failover.test.mjs): its own client (ioredis or node-redis; through Sentinel or on a
// Cluster) and its own RedisLockStore, taking ONE key `executions` times through the
// real engine while the test kills a primary. Started with child_process.fork:
//
//   node failover-worker.mjs '<json settings>'
//
// It sends { ready: true } once connected and starts on the message 'go'. Inside the
// lock it writes to the test's fenced resource (IPC: { write: { token, phase } }, the
// answer { accepted }) as it starts and before it ends, holding `holdMs` between. A
// lease lost (LOCK_LOST) counts as an execution done; a store failure (the primary is
// gone) is retried until `deadlineMs`. It sends its result and exits on its own: the
// store and client closed, the IPC channel let go.

import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { createCluster, createSentinel } from 'redis';
import { ResiliencePipelineBuilder, getLockToken } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';

const noop = () => {};
const settings = JSON.parse(process.argv[2]);
const { kind, topology, key, ttl, executions, holdMs, deadlineMs } = settings;

async function connect() {
  if (topology === 'sentinel' && kind === 'ioredis') {
    const client = new Redis({
      sentinels: settings.sentinels,
      name: settings.name,
      lazyConnect: true,
      retryStrategy: () => 100,
      sentinelRetryStrategy: () => 100,
    });
    client.on('error', noop);
    await client.connect();
    return { client, close: () => client.disconnect() };
  }
  if (topology === 'sentinel' && kind === 'node-redis') {
    const client = createSentinel({
      name: settings.name,
      sentinelRootNodes: settings.sentinels,
      nodeClientOptions: { socket: { reconnectStrategy: () => 100 } },
      sentinelClientOptions: { socket: { reconnectStrategy: () => 100 } },
    });
    client.on('error', noop);
    await client.connect();
    return { client, close: () => client.destroy() };
  }
  if (topology === 'cluster' && kind === 'ioredis') {
    const client = new Redis.Cluster(settings.nodes, { lazyConnect: true, clusterRetryStrategy: () => 100 });
    client.on('error', noop);
    await client.connect();
    return { client, close: () => client.disconnect() };
  }
  if (topology === 'cluster' && kind === 'node-redis') {
    const client = createCluster({
      rootNodes: settings.nodes.map((n) => ({ socket: n })),
      defaults: { socket: { reconnectStrategy: () => 100, connectTimeout: 1000 } },
    });
    client.on('error', noop);
    await client.connect();
    // node-redis 5.12 leaves a node's connection open when the cluster is destroyed
    // while it connects (here: the promoted replica, found by a rediscovery): wait.
    const connecting = () => client.masters.map((m) => m.connectPromise).filter(Boolean);
    return { client, close: () => Promise.allSettled(connecting()).then(() => client.destroy()) };
  }
  throw new Error(`unknown client ${kind} on ${topology}`);
}

let nextRequest = 0;
const pending = new Map();
process.on('message', (message) => {
  if (message === 'go') go();
  else if (message?.answer !== undefined) {
    pending.get(message.answer)?.(message.accepted);
    pending.delete(message.answer);
  }
});

/** Writes to the test's fenced resource; resolves to whether it was accepted. */
function write(token, phase) {
  const id = nextRequest++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    process.send({ write: { id, token, phase } });
  });
}

const { client, close } = await connect();
const store = new RedisLockStore({ client, prefix: 'failover', ...(settings.minReplicas ? { minReplicas: settings.minReplicas } : {}) });
const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl, wait: '20s' }).build();
let started = false;
process.send({ ready: true });

async function go() {
  if (started) return;
  started = true;
  const result = { done: 0, lost: 0, storeErrors: 0, other: [] };
  const deadline = Date.now() + deadlineMs;
  while (result.done < executions && Date.now() < deadline) {
    try {
      await pipeline.execute(async ({ signal }) => {
        const token = getLockToken();
        await write(token, 'start');
        await sleep(holdMs, undefined, { signal });
        await write(token, 'end');
      });
      result.done += 1;
    } catch (err) {
      if (err?.code === 'LOCK_LOST') {
        result.lost += 1;
        result.done += 1;
      } else if (err?.code === 'LOCK_STORE_FAILED' || err?.code === 'LOCK_NOT_ACQUIRED') {
        result.storeErrors += 1;
        await sleep(50);
      } else {
        result.other.push(`${err?.name}: ${err?.message}`);
        break;
      }
    }
  }
  process.send({ result });
  await store.close();
  await close();
  process.disconnect();
}
