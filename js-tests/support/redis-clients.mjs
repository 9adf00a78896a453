// Redis clients for the tests, for both client libraries the store supports: connected
// to a test server with a quick reconnect (every 50 ms), or aimed at a port where
// nothing listens and set up to fail fast; and closing them. Connection errors are
// swallowed on the client ('error' events): the tests look at what the store's calls do.

import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { createClient, createCluster } from 'redis';

const noop = () => {};

/** An ioredis client connected to 127.0.0.1:`port`. */
export async function connectIoredis(port) {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => 50 });
  client.on('error', noop);
  await client.connect();
  return client;
}

/** An ioredis Cluster client on the cluster whose nodes are `nodes` ([{ host, port }]). */
export async function connectIoredisCluster(nodes) {
  const client = new Redis.Cluster(nodes, { lazyConnect: true });
  client.on('error', noop);
  await client.connect();
  return client;
}

/** A node-redis cluster client on the cluster whose nodes are `nodes` ([{ host, port }]). */
export async function connectNodeRedisCluster(nodes) {
  const client = createCluster({ rootNodes: nodes.map((n) => ({ socket: n })) });
  client.on('error', noop);
  await client.connect();
  return client;
}

/** An ioredis client for a port where nothing listens, set up to fail fast. */
export async function unreachableIoredis(port) {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 300,
    retryStrategy: () => null,
  });
  client.on('error', noop);
  return client;
}

/** A node-redis client connected to 127.0.0.1:`port`. */
export async function connectNodeRedis(port) {
  const client = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: () => 50 } });
  client.on('error', noop);
  await client.connect();
  return client;
}

/** A node-redis client for a port where nothing listens: its connect() was refused. */
export async function unreachableNodeRedis(port) {
  const client = createClient({
    socket: { host: '127.0.0.1', port, connectTimeout: 300, reconnectStrategy: false },
    disableOfflineQueue: true,
  });
  client.on('error', noop);
  await assert.rejects(client.connect(), /ECONNREFUSED/);
  return client;
}

/** Closes an ioredis client, unless it already gave up. */
export function closeIoredis(client) {
  // On a client that already gave up ('end'), ioredis's disconnect() arms a 2 s
  // timer for a stream that will never emit 'close' again: it would hold the exit.
  if (client.status !== 'end') client.disconnect();
}

/** Closes a node-redis client at once (nothing to flush), if it is not closed already. */
export function closeNodeRedis(client) {
  try {
    client.destroy();
  } catch {
    // already closed
  }
}

/**
 * Both client libraries with their default reconnect behaviour (ioredis: retry after
 * min(n x 50, 2000) ms, offline queue, unanswered commands resent after a reconnect;
 * node-redis: retry after min(2^n x 50, 2000) ms + jitter, offline queue, commands in
 * flight on a dropped socket rejected), each connection named so that CLIENT LIST finds
 * it: `connect(port, name)` and `close(client)`.
 */
export const NAMED_CLIENTS = {
  ioredis: {
    name: 'ioredis',
    async connect(port, connectionName) {
      const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, connectionName });
      client.on('error', noop);
      await client.connect();
      return client;
    },
    close: closeIoredis,
  },
  'node-redis': {
    name: 'node-redis',
    async connect(port, name) {
      const client = createClient({ socket: { host: '127.0.0.1', port }, name });
      client.on('error', noop);
      await client.connect();
      return client;
    },
    close: closeNodeRedis,
  },
};
