// A lock holder in its own Node process, for js-tests/redis-faults.test.mjs. It takes one
// lock through the real engine (the package imported by name) on a RedisLockStore, with
// the client library's DEFAULT reconnect behaviour, and reports on stdout, one JSON
// object a line. Two modes:
//
//   node fault-holder.mjs hold <ioredis|node-redis> <redis port> <key> <ttl>
//     Holds `key` until the lease is lost (it waits for its signal), then throws.
//     Lines: {ready,engine} {holding,token} {renewed} {lost,reason,onLockLost}
//     {settled,error,cause} {next,token} {done,onLockLost,lostEvents,unhandled}
//     and exits 0. `next` is a fresh execution on the same key after the loss: the
//     process keeps working.
//
//   node fault-holder.mjs stale-writer <ioredis|node-redis> <redis port> <pg url> <key> <ttl> <account id>
//     Holds `key` and, while holding, writes to the fenced row every 100 ms:
//       UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2
//     It IGNORES its signal on purpose (a holder that cannot or does not check it in
//     time): only the fence can stop its writes. It stops when a line "stop" arrives
//     on stdin, then reports how the execution settled.
//     Lines: {ready,engine} {holding,token} {write,n,token,balance,accepted,aborted,sentAt}
//     {settled,value|error} {done,onLockLost,unhandled}. `sentAt` is Date.now() just
//     before the UPDATE is handed to the driver: the wall clock is the one clock this
//     process and the test share, so the test can tell writes sent after SIGCONT.

import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { createClient } from 'redis';
import pg from 'pg';
import { ResiliencePipelineBuilder, getLockToken, engine } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';

const [mode, kind, portText, ...rest] = process.argv.slice(2);
const port = Number(portText);
const noop = () => {};
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

let unhandled = 0;
process.on('unhandledRejection', () => {
  unhandled += 1;
});

async function connect() {
  if (kind === 'ioredis') {
    const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, connectionName: `fault-holder-${process.pid}` });
    client.on('error', noop);
    await client.connect();
    return { client, close: () => client.disconnect() };
  }
  if (kind === 'node-redis') {
    const client = createClient({ socket: { host: '127.0.0.1', port }, name: `fault-holder-${process.pid}` });
    client.on('error', noop);
    await client.connect();
    return { client, close: () => client.destroy() };
  }
  throw new Error(`unknown client kind ${kind}`);
}

const lines = createInterface({ input: process.stdin });
const stdinLines = [];
const stdinWaiters = [];
lines.on('line', (line) => {
  const waiter = stdinWaiters.shift();
  if (waiter) waiter(line);
  else stdinLines.push(line);
});
const nextLine = () => (stdinLines.length > 0 ? Promise.resolve(stdinLines.shift()) : new Promise((r) => stdinWaiters.push(r)));

const { client, close } = await connect();
const store = new RedisLockStore({ client, prefix: 'faults' });
let onLockLost = 0;
let lostEvents = 0;
const telemetry = (event) => {
  if (event.type === 'renewed') say({ renewed: true });
  if (event.type === 'lost') lostEvents += 1;
};

if (mode === 'hold') {
  const [key, ttl] = rest;
  const pipeline = new ResiliencePipelineBuilder({ telemetry })
    .addLock({ key, store, ttl, onLockLost: () => (onLockLost += 1) })
    .build();
  say({ ready: true, engine });
  try {
    await pipeline.execute(async ({ signal }) => {
      say({ holding: true, token: getLockToken() });
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      say({ lost: true, reason: signal.reason?.name, onLockLost });
      throw new Error('stopped: the lease is gone');
    });
    say({ settled: true, error: null });
  } catch (error) {
    say({ settled: true, error: error?.name, cause: error?.cause?.message });
  }
  // A second loss report would come from a later renewal or expiry of the old lease.
  await sleep(300);
  const next = await new ResiliencePipelineBuilder().addLock({ key, store, ttl, wait: '5s' }).build().execute(() => getLockToken());
  say({ next: true, token: next });
  await store.close();
  close();
  lines.close();
  say({ done: true, onLockLost, lostEvents, unhandled });
} else if (mode === 'stale-writer') {
  const [url, key, ttl, accountText] = rest;
  const account = Number(accountText);
  const db = new pg.Client({ connectionString: url });
  db.on('error', noop);
  await db.connect();
  const pipeline = new ResiliencePipelineBuilder({ telemetry })
    .addLock({ key, store, ttl, onLockLost: () => (onLockLost += 1) })
    .build();
  say({ ready: true, engine });
  let stop = false;
  nextLine().then(() => {
    stop = true;
  });
  try {
    const value = await pipeline.execute(async ({ signal }) => {
      const token = getLockToken();
      say({ holding: true, token });
      let n = 0;
      while (!stop) {
        n += 1;
        const balance = 1000 + n;
        const aborted = signal.aborted; // read for the report only: it does not stop the write
        const sentAt = Date.now();
        const { rowCount } = await db.query(
          'UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2',
          [balance, token, account],
        );
        say({ write: true, n, token, balance, accepted: rowCount === 1, aborted, sentAt });
        await sleep(100);
      }
      return n;
    });
    say({ settled: true, value });
  } catch (error) {
    say({ settled: true, error: error?.name, cause: error?.cause?.message });
  }
  await db.end();
  await store.close();
  close();
  lines.close();
  say({ done: true, onLockLost, lostEvents, unhandled });
} else {
  throw new Error(`unknown mode ${mode}`);
}
