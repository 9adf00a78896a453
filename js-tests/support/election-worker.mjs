// One candidate in the election fleets (js-tests/election-*.test.mjs): a separate Node
// process that campaigns with `lead` on a real store and, while it leads, writes its
// term to a fenced resource outside the store (support/election-fleet.mjs) every tick.
//
//   node election-worker.mjs <redis|postgres|etcd> <address> <key> <ttl ms> <resource url> <name>
//
// Each tick reads the leadership's signal first and writes only while it is not aborted.
// Once deposed, it makes one late write with its old term (a leader that acts anyway:
// the resource must refuse it) and campaigns again. Stdout, one JSON object a line:
// {"ready":true} once connected; then {"elected":term} and {"deposed":term,"reason"}.
// It starts when a line arrives on stdin.

import { lead } from 'leasehold';
import { readyThenGo } from './fleet.mjs';

const [kind, address, key, ttlText, resource, name] = process.argv.slice(2);
const ttl = Number(ttlText);
const TICK_MS = 25;
const print = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

async function connect() {
  if (kind === 'redis') {
    const { RedisLockStore } = await import('leasehold/redis');
    const { Redis } = await import('ioredis');
    const client = new Redis({ port: Number(address), host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    client.on('error', () => {});
    return new RedisLockStore({ client, prefix: 'election' });
  }
  if (kind === 'postgres') {
    const { PostgresLockStore } = await import('leasehold/postgres');
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: address, max: 3 });
    pool.on('error', () => {});
    const store = new PostgresLockStore({ client: pool, table: 'election_locks' });
    await store.ensureSchema();
    return store;
  }
  if (kind === 'etcd') {
    const { EtcdLockStore } = await import('leasehold/etcd');
    const { Etcd3 } = await import('etcd3');
    return new EtcdLockStore({ client: new Etcd3({ hosts: address.split(',') }) });
  }
  throw new Error(`unknown store kind ${kind}`);
}

/**
 * Writes `term` to the resource; resolves whether it was accepted. `checked`: when (wall
 * clock, shared by every process here) the tick read its signal.
 */
async function write(term, late, checked = Date.now()) {
  try {
    const response = await fetch(`${resource}/write`, {
      method: 'POST',
      body: JSON.stringify({ pid: process.pid, name, term, late, checked }),
    });
    return (await response.json()).accepted;
  } catch {
    return false;
  }
}

const store = await connect();
await readyThenGo({});

await lead(
  key,
  async ({ term, signal }) => {
    print({ elected: term });
    for (;;) {
      const checked = Date.now();
      if (signal.aborted) break;
      await write(term, false, checked);
      await new Promise((resolve) => setTimeout(resolve, TICK_MS));
    }
    print({ deposed: term, reason: signal.reason?.name });
    await write(term, true);
  },
  { store, ttl, name },
);
