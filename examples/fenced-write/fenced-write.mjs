// A balance update guarded by a fencing token, in SQL. A lease alone cannot stop a
// holder that was paused (GC, a frozen VM, a slow network) past its ttl from writing
// after someone else took over; the database can, if every write carries the token:
//
//   UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence < $2
//
// The row remembers the highest token that wrote it and refuses older ones.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node fenced-write.mjs
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { ResiliencePipelineBuilder, acquireLock, getLockToken } from 'leasehold';
import { PostgresLockStore } from 'leasehold/postgres';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
const store = new PostgresLockStore({ client: pool });
await store.ensureSchema();
await pool.query('CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL DEFAULT 0)');
await pool.query('INSERT INTO accounts VALUES (42, 100, 0) ON CONFLICT (id) DO UPDATE SET balance = 100, fence = 0');

const key = 'account:42';
const t0 = Date.now();
const log = (who, text) => console.log(`[${String(Date.now() - t0).padStart(5)} ms] ${who}: ${text}`);

/** The only way to write a balance: with the writer's fencing token. */
async function writeBalance(token, balance) {
  const { rowCount } = await pool.query('UPDATE accounts SET balance = $1, fence = $2 WHERE id = 42 AND fence < $2', [
    balance,
    token,
  ]);
  return rowCount === 1;
}
const readBalance = async () => (await pool.query('SELECT balance FROM accounts WHERE id = 42')).rows[0].balance;

// Worker A takes a 500 ms lease (by hand, without renewal), reads, and then stalls for
// 1.5 s before writing: its lease runs out while it is stalled, and it cannot tell.
async function workerA() {
  const lease = await acquireLock(store, key, '500ms');
  const balance = await readBalance();
  log('A', `holds ${key} with token ${lease.fencingToken}, reads balance ${balance}, then stalls`);
  await sleep(1500); // a long GC pause, a frozen VM...
  log('A', `resumes and writes balance ${balance - 30} (a withdrawal of 30)`);
  if (await writeBalance(lease.fencingToken, balance - 30)) log('A', 'write accepted');
  else log('A', `write REJECTED: token ${lease.fencingToken} is stale, a newer holder has written`);
  log('A', `release: ${(await lease.release()) ? 'released' : 'nothing to release, the lease had lapsed'}`);
}

// Worker B wants the same account; it waits (up to 5 s) for the lock.
async function workerB() {
  await sleep(50);
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: '5s', wait: '5s' }).build();
  await pipeline.execute(async () => {
    const token = getLockToken();
    const balance = await readBalance();
    log('B', `got ${key} with token ${token} once A's lease lapsed, reads ${balance}, deposits 50`);
    log('B', `write ${(await writeBalance(token, balance + 50)) ? 'accepted' : 'REJECTED'}`);
  });
}

await Promise.all([workerA(), workerB()]);
log('db', `final balance ${await readBalance()} (100 + 50: the stale withdrawal never landed)`);
await store.close();
await pool.end();
