/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import pg from 'pg';
import { withLock } from 'leasehold';
import { PostgresLockStore } from 'leasehold/postgres';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const store = new PostgresLockStore({ client: pool });
await store.ensureSchema(); // creates its table once

const charged = await withLock('invoice:42', async () => {
  // charge invoice 42: one process at a time across the fleet
  return 'charged';
}, { store, ttl: '30s' });
console.log(charged);

await store.close();
await pool.end();
