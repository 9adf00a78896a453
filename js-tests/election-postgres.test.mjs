// Leader election on PostgreSQL (issue #31), against a real server: five candidate
// processes on one key; the leader SIGKILLed, SIGSTOPped past its ttl and resumed
// (support/election-scenarios.mjs); resign() handing over in this process. Every wait is
// bounded; times are printed, not asserted.
// Run: node --test js-tests/election-postgres.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine)

import { after, before, test } from 'node:test';
import pg from 'pg';
import { PostgresLockStore } from 'leasehold/postgres';
import { startPostgres } from './support/postgres.mjs';
import { runFleetScenarios, resignHandsOver, lapseHandsOver, watchFollows } from './support/election-scenarios.mjs';

let server;
let pool;

before(async () => {
  server = await startPostgres({ database: 'election' });
  pool = new pg.Pool({ ...server.connectionOptions, max: 4 });
  pool.on('error', () => {});
  await new PostgresLockStore({ client: pool, table: 'election_locks' }).ensureSchema();
});

after(async () => {
  await pool?.end();
  await server?.stop();
});

test('PostgreSQL: five processes; SIGKILL and SIGSTOP', async (t) => {
  await runFleetScenarios(t, { kind: 'postgres', address: server.url, ttl: 600 });
});

test('PostgreSQL: resign() hands over without waiting for the ttl', async (t) => {
  await resignHandsOver(t, { kind: 'postgres', makeStore: async () => new PostgresLockStore({ client: pool, table: 'election_locks' }) });
});

test('PostgreSQL: a leader that stops renewing is replaced as its lease lapses', async (t) => {
  await lapseHandsOver(t, { kind: 'postgres', makeStore: async () => new PostgresLockStore({ client: pool, table: 'election_locks' }) });
});

test('PostgreSQL: leader() and watchLeader() follow the leadership', async (t) => {
  await watchFollows(t, { kind: 'postgres', makeStore: async () => new PostgresLockStore({ client: pool, table: 'election_locks' }) });
});
