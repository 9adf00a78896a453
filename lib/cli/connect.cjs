'use strict';
// Opens the server a `leasehold` command names, through the client library the user
// installed (ioredis, pg, etcd3: peer dependencies), and the leasehold store on it.
// Every step is bounded: a server that does not answer is an error, never a hang.

const { createRequire } = require('node:module');
const path = require('node:path');

/** How long connecting and each read may take. */
const TIMEOUT_MS = 5_000;

class ConnectError extends Error {}

const PACKAGES = { redis: 'ioredis', postgres: 'pg', etcd: 'etcd3' };

/** `name` from the user's project (the working directory), else from beside leasehold. */
function load(name, kind) {
  for (const from of [path.join(process.cwd(), 'package.json'), __filename]) {
    try {
      return createRequire(from)(name);
    } catch (error) {
      if (error?.code !== 'MODULE_NOT_FOUND') throw error;
    }
  }
  throw new ConnectError(`--${kind} needs the ${name} package, which is not installed here: npm install ${name}`);
}

/** `promise`, or a ConnectError saying `what` took longer than TIMEOUT_MS. */
async function bounded(promise, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new ConnectError(`${what}: no answer within ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

function unreachable(what, error) {
  if (error instanceof ConnectError) return error;
  const reason = error?.code ?? error?.message ?? String(error);
  return new ConnectError(`cannot reach ${what}: ${reason}${error?.message && error.code ? ` (${error.message})` : ''}`);
}

/** Hides the password of `url` for messages. */
function shown(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

async function openRedis({ target, cluster }, options) {
  const Redis = load('ioredis', 'redis');
  const { RedisLockStore } = require('../stores/redis/index.cjs');
  const url = new URL(target);
  const what = `Redis at ${shown(target)}`;
  const once = { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: TIMEOUT_MS };
  const client = cluster
    ? new Redis.Cluster([{ host: url.hostname, port: Number(url.port || 6379) }], {
        lazyConnect: true,
        enableOfflineQueue: false,
        clusterRetryStrategy: () => null,
        redisOptions: { ...once, username: decodeURIComponent(url.username) || undefined, password: decodeURIComponent(url.password) || undefined, tls: url.protocol === 'rediss:' ? {} : undefined },
      })
    : new Redis(target, once);
  let lastError;
  client.on('error', (error) => {
    lastError = error;
  });
  try {
    await bounded(client.connect(), what);
  } catch (error) {
    client.disconnect();
    throw unreachable(what, lastError ?? error);
  }
  const store = new RedisLockStore({ client, ...(options.prefix !== undefined ? { prefix: options.prefix } : {}) });
  return {
    store,
    what,
    async close() {
      await store.close();
      client.disconnect();
    },
  };
}

async function openPostgres({ target }, options) {
  const pg = load('pg', 'postgres');
  const { PostgresLockStore } = require('../stores/postgres/index.cjs');
  const what = `PostgreSQL at ${shown(target)}`;
  const client = new pg.Client({ connectionString: target, connectionTimeoutMillis: TIMEOUT_MS, query_timeout: TIMEOUT_MS });
  client.on('error', () => {});
  try {
    await bounded(client.connect(), what);
  } catch (error) {
    client.end().catch(() => {});
    throw unreachable(what, error);
  }
  const store = new PostgresLockStore({ client, ...(options.table ? { table: options.table } : {}), ...(options.schema ? { schema: options.schema } : {}) });
  return {
    store,
    what,
    async close() {
      await store.close();
      await client.end();
    },
  };
}

async function openEtcd({ target }, options) {
  const { Etcd3 } = load('etcd3', 'etcd');
  const { EtcdLockStore } = require('../stores/etcd/index.cjs');
  const what = `etcd at ${target.join(',')}`;
  const client = new Etcd3({ hosts: target, dialTimeout: TIMEOUT_MS });
  try {
    await bounded(client.maintenance.status(), what);
  } catch (error) {
    client.close();
    throw unreachable(what, error);
  }
  const store = new EtcdLockStore({ client, ...(options.prefix !== undefined ? { prefix: options.prefix } : {}) });
  return {
    store,
    what,
    async close() {
      await store.close();
      client.close();
    },
  };
}

/** `{ store, what, close() }` for the server of a parsed command line. */
function open(parsed) {
  const openers = { redis: openRedis, postgres: openPostgres, etcd: openEtcd };
  return openers[parsed.server.kind](parsed.server, parsed);
}

module.exports = { open, bounded, ConnectError, PACKAGES, TIMEOUT_MS };
