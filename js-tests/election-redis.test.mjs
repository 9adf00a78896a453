// Leader election on Redis (issue #31), against a real server: five candidate processes
// on one key; the leader SIGKILLed, SIGSTOPped past its ttl and resumed, and Redis
// restarted with its data lost under a leader (support/election-scenarios.mjs); resign()
// handing over and a lapsed leader replaced, in this process, on a server and a Cluster.
// Every wait is bounded; times are printed, not asserted.
// Run: node --test js-tests/election-redis.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine)

import { after, before, test } from 'node:test';
import { RedisLockStore } from 'leasehold/redis';
import { startRedisServer, startRedisCluster } from './support/redis.mjs';
import { connectIoredis, connectIoredisCluster } from './support/redis-clients.mjs';
import { runFleetScenarios, resignHandsOver, lapseHandsOver, watchFollows } from './support/election-scenarios.mjs';

let redis;
let cluster;
const clients = [];
const stores = [];
/** A store on its own client, closed (with its subscriber connection) after the file. */
function keep(client, prefix) {
  clients.push(client);
  const store = new RedisLockStore({ client, prefix });
  stores.push(store);
  return store;
}

before(async () => {
  [redis, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
});

after(async () => {
  await Promise.allSettled(stores.map((store) => store.close()));
  for (const client of clients) client.disconnect();
  await Promise.allSettled([redis?.stop(), cluster?.stop()]);
});

test('Redis: five processes; SIGKILL, SIGSTOP and a restart that loses the data', async (t) => {
  await runFleetScenarios(t, { kind: 'redis', address: String(redis.port), ttl: 600, restart: () => redis.restart(), newTerm: true, restartWhat: 'a Redis restart that lost the data' });
});

test('Redis: resign() hands over without waiting for the ttl', async (t) => {
  await resignHandsOver(t, {
    kind: 'redis',
    makeStore: async () => {
      return keep(await connectIoredis(redis.port), 'election-resign');
    },
  });
});

test('Redis: a leader that stops renewing is replaced as its lease lapses', async (t) => {
  await lapseHandsOver(t, {
    kind: 'redis',
    makeStore: async () => {
      return keep(await connectIoredis(redis.port), 'election-lapse');
    },
  });
});

test('Redis Cluster: resign() hands over, a lapsed leader is replaced', async (t) => {
  const makeStore = async () => {
    return keep(await connectIoredisCluster(cluster.nodes), 'election-cluster');
  };
  await resignHandsOver(t, { kind: 'redis-cluster', makeStore });
  await lapseHandsOver(t, { kind: 'redis-cluster', makeStore });
});

test('Redis: leader() and watchLeader() follow the leadership', async (t) => {
  await watchFollows(t, {
    kind: 'redis',
    makeStore: async () => {
      return keep(await connectIoredis(redis.port), 'election-watch');
    },
  });
});
