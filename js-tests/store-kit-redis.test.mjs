// The store kit (`leasehold/testing`) on RedisLockStore against real Redis: a standalone
// server and a 3-master cluster, each through ioredis and node-redis. Runs once per engine.
import { after, before, describe } from 'node:test';
import { RedisLockStore } from 'leasehold/redis';
import { testLockStore } from 'leasehold/testing';
import { startRedisCluster, startRedisServer } from './support/redis.mjs';
import {
  closeIoredis,
  closeNodeRedis,
  connectIoredis,
  connectIoredisCluster,
  connectNodeRedis,
  connectNodeRedisCluster,
} from './support/redis-clients.mjs';

const CLIENTS = [
  { name: 'ioredis', connect: connectIoredis, connectCluster: connectIoredisCluster, close: closeIoredis },
  { name: 'node-redis', connect: connectNodeRedis, connectCluster: connectNodeRedisCluster, close: closeNodeRedis },
];

/** Registers the kit for `connect()`'s client (made before the cases run, closed after). */
function kitOn(name, connect, close) {
  let client;
  before(async () => {
    client = await connect();
  });
  after(() => close(client));
  testLockStore(name, {
    store: () => new RedisLockStore({ client, prefix: 'kit' }),
    close: (store) => store.close(),
    // The store's own `permits` getter says so too (js-tests/redis-permits.test.mjs checks it).
    capabilities: { permits: true },
  });
}

describe('standalone Redis', () => {
  let server;
  before(async () => {
    server = await startRedisServer();
  });
  after(() => server?.stop());
  for (const kind of CLIENTS) kitOn(`RedisLockStore through ${kind.name}`, () => kind.connect(server.port), kind.close);
});

describe('Redis Cluster, 3 masters', () => {
  let cluster;
  before(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  });
  after(() => cluster?.stop());
  for (const kind of CLIENTS) kitOn(`RedisLockStore on a cluster through ${kind.name}`, () => kind.connectCluster(cluster.nodes), kind.close);
});
