// The store kit (`leasehold/testing`) on PostgresLockStore against a real PostgreSQL,
// through a pg Pool (LISTEN on a connection of its own). Runs once per engine.
import { after, before } from 'node:test';
import pg from 'pg';
import { PostgresLockStore } from 'leasehold/postgres';
import { testLockStore } from 'leasehold/testing';
import { startPostgres } from './support/postgres.mjs';

let server;
let pool;
before(async () => {
  server = await startPostgres();
  pool = new pg.Pool({ ...server.connectionOptions, max: 8 });
  pool.on('error', () => {});
  await new PostgresLockStore({ client: pool }).ensureSchema();
});
after(async () => {
  await pool?.end();
  await server?.stop();
});

testLockStore('PostgresLockStore through a pg Pool', {
  store: () => new PostgresLockStore({ client: pool }),
  close: (store) => store.close(),
  // Held to the permit cases (limit, weight, mode), not only read from the store.
  capabilities: { permits: true },
});
