// PostgresLockStore against a real PostgreSQL (initdb'd into a temp dir, see
// support/postgres.mjs), through the `pg` client, and through the real engine: the
// store contract, one statement per operation, a fleet of processes on one key, fencing
// a stale holder in SQL, and wake-on-release through LISTEN/NOTIFY. Nothing is mocked;
// every wait is bounded. Run: node --test js-tests/postgres-store.test.mjs
// (LEASEHOLD_ENGINE=wasm runs it on the wasm engine.)

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import {
  engine,
  FakeTimeProvider,
  ResiliencePipelineBuilder,
  LockStoreError,
  LockNotAcquiredError,
  acquireLock,
  getLockToken,
} from 'leasehold';
import { PostgresLockStore } from 'leasehold/postgres';
import { startPostgres, waitFor } from './support/postgres.mjs';
import { within } from './support/async.mjs';
import { FLEET_DONE_MS, FLEET_READY_MS, startFleetWorker } from './support/fleet.mjs';
import { uniqueKey } from './support/keys.mjs';
import { advance, deferred, flush } from './support/time.mjs';

// A lost connection, a dead listener or a failing statement must never leave a
// rejection unhandled or an exception uncaught.
const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

// ---------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------

const noop = () => {};

const lock = (options) => new ResiliencePipelineBuilder().addLock(options).build();

/** A `{ query }` client that records every query (text and values) and passes it on. */
function recording(client) {
  const calls = [];
  const wrapped = {
    query(text, values) {
      calls.push({ text, values });
      return client.query(text, values);
    },
  };
  return { client: wrapped, calls };
}

let server;
let pool;
let admin; // a plain Client for direct SQL
const stores = [];
const clients = [];

function newStore(options) {
  const store = new PostgresLockStore({ client: pool, ...options });
  stores.push(store);
  return store;
}

async function newClient() {
  const client = new pg.Client(server.connectionOptions);
  client.on('error', noop);
  await client.connect();
  clients.push(client);
  return client;
}

/** The server processes of the connections named `application_name`. */
async function backends(application_name) {
  const { rows } = await admin.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [application_name]);
  return rows.map((r) => r.pid);
}

/**
 * A TCP proxy to the test server that holds every connection, unanswered, until
 * `letThrough()`: a server slow to accept. `connections` lists them, with `answered`
 * (the server sent something) and `closed` (a promise).
 */
async function holdingProxy() {
  const connections = [];
  const held = [];
  const sockets = new Set();
  let open = false;
  const proxy = net.createServer((socket) => {
    socket.on('error', noop);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    const connection = { answered: false, closed: new Promise((resolve) => socket.on('close', resolve)) };
    connections.push(connection);
    const forward = () => {
      const upstream = net.connect(server.port, server.host);
      upstream.on('error', noop);
      upstream.on('data', () => {
        connection.answered = true;
      });
      upstream.on('close', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
      socket.pipe(upstream).pipe(socket);
    };
    if (open) forward();
    else held.push(forward);
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: proxy.address().port,
    connections,
    letThrough() {
      open = true;
      for (const forward of held.splice(0)) forward();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => proxy.close(resolve));
    },
  };
}

async function row(table, key) {
  const { rows } = await admin.query(`SELECT key, owner, token::text AS token, expires_at FROM ${table} WHERE key = $1`, [key]);
  return rows[0];
}

before(async () => {
  server = await startPostgres();
  pool = new pg.Pool({ ...server.connectionOptions, max: 8 });
  pool.on('error', noop);
  admin = new pg.Client(server.connectionOptions);
  admin.on('error', noop);
  await admin.connect();
  await new PostgresLockStore({ client: pool }).ensureSchema();
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  await Promise.allSettled(clients.map((c) => c.end()));
  await admin?.end().catch(noop);
  await pool?.end();
  await server?.stop();
  assert.deepEqual(unhandled, [], 'no unhandled rejection in the whole file');
});

test(`the engine in use is the one asked for (${engine})`, () => {
  assert.equal(engine, process.env.LEASEHOLD_ENGINE || 'native');
});

// ---------------------------------------------------------------------------------
// construction and validation (no statement runs)
// ---------------------------------------------------------------------------------

describe('PostgresLockStore LISTENs (a listen client that records them, no server)', () => {
  test('a key waited for just after a pass with nothing to send is listened to at once', async () => {
    const statements = [];
    const listenClient = {
      async query(text) {
        statements.push(text);
        return { rows: [] };
      },
      on() {},
      removeListener() {},
    };
    const client = { query: async () => ({ rows: [] }) };
    const store = new PostgresLockStore({ client, listenClient });
    const turns = async () => {
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    const offA = store.subscribe('a', noop);
    await turns();
    assert.equal(statements.length, 1, 'the LISTEN of a');
    // A waiter for `a` leaves as the next arrives (a pass with nothing to send), and a
    // waiter for `b` comes just as that pass ends.
    offA();
    store.subscribe('a', noop);
    queueMicrotask(() => store.subscribe('b', noop));
    await turns();
    assert.equal(statements.length, 2, `the LISTEN of b: ${statements.join(' | ')}`);
    assert.match(statements[1], /^LISTEN /);
    await store.close();
  });
});

describe('PostgresLockStore: arguments', () => {
  test('the constructor names what is wrong', () => {
    const client = { query: async () => ({ rows: [] }) };
    assert.throws(() => new PostgresLockStore(), { name: 'TypeError', message: /options/ });
    assert.throws(() => new PostgresLockStore({}), { name: 'TypeError', message: /client/ });
    assert.throws(() => new PostgresLockStore({ client: null }), { name: 'TypeError', message: /client/ });
    assert.throws(() => new PostgresLockStore({ client: { get() {} } }), { name: 'TypeError', message: /client/ });
    assert.throws(() => new PostgresLockStore({ client, table: '' }), { name: 'TypeError', message: /table/ });
    assert.throws(() => new PostgresLockStore({ client, table: 7 }), { name: 'TypeError', message: /table/ });
    assert.throws(() => new PostgresLockStore({ client, table: 'x'.repeat(64) }), { name: 'RangeError', message: /table/ });
    assert.throws(() => new PostgresLockStore({ client, table: 'a\u0000b' }), { name: 'TypeError', message: /table/ });
    assert.throws(() => new PostgresLockStore({ client, table: 'locks\ud800' }), { name: 'TypeError', message: /table must be well-formed/ });
    assert.throws(() => new PostgresLockStore({ client, schema: 'app\udc00' }), { name: 'TypeError', message: /schema must be well-formed/ });
    assert.throws(() => new PostgresLockStore({ client, schema: '' }), { name: 'TypeError', message: /schema/ });
    assert.throws(() => new PostgresLockStore({ client, schema: null }), { name: 'TypeError', message: /schema/ });
    assert.throws(() => new PostgresLockStore({ client, notify: 'yes' }), { name: 'TypeError', message: /notify/ });
    assert.throws(() => new PostgresLockStore({ client, listenClient: {} }), { name: 'TypeError', message: /listenClient/ });
    assert.throws(() => new PostgresLockStore({ client, tableName: 'locks' }), { name: 'TypeError', message: /no option "tableName"; .*\btable\b/ });
    const store = new PostgresLockStore({ client });
    assert.equal(store.table, 'leasehold_locks');
    assert.equal(store.schema, undefined);
    assert.equal(store.notify, true);
    assert.equal(store.canSubscribe, false, 'a single client without listenClient cannot listen');
    assert.equal(store.subscribe('k', noop)(), undefined, 'subscribe is then a no-op returning a no-op');
  });

  test('every method names its bad argument, before any statement runs', async () => {
    const { client, calls } = recording({ query: async () => ({ rows: [] }) });
    const store = new PostgresLockStore({ client });
    const badText = [
      [undefined, 'TypeError'],
      [null, 'TypeError'],
      ['', 'TypeError'],
      [42, 'TypeError'],
      [{}, 'TypeError'],
      ['a\u0000b', 'TypeError'],
      ['a\uD800', 'TypeError'],
    ];
    for (const [bad, name] of badText) {
      await assert.rejects(store.acquire(bad, 'o', 1000), { name, message: /key/ });
      await assert.rejects(store.acquire('k', bad, 1000), { name, message: /owner/ });
      await assert.rejects(store.renew(bad, 'o', 1000), { name, message: /key/ });
      await assert.rejects(store.renew('k', bad, 1000), { name, message: /owner/ });
      await assert.rejects(store.release(bad, 'o'), { name, message: /key/ });
      await assert.rejects(store.release('k', bad), { name, message: /owner/ });
      await assert.rejects(store.isLocked(bad), { name, message: /key/ });
      await assert.rejects(store.ttl(bad), { name, message: /key/ });
      assert.throws(() => store.subscribe(bad, noop), { name, message: /key/ });
    }
    for (const [bad, name] of [
      ['1000', 'TypeError'],
      [undefined, 'TypeError'],
      [10n, 'TypeError'],
      [0, 'RangeError'],
      [-5, 'RangeError'],
      [1.5, 'RangeError'],
      [Number.NaN, 'RangeError'],
      [Number.POSITIVE_INFINITY, 'RangeError'],
    ]) {
      await assert.rejects(store.acquire('k', 'o', bad), { name, message: /ttlMs/ });
      await assert.rejects(store.renew('k', 'o', bad), { name, message: /ttlMs/ });
    }
    assert.throws(() => store.subscribe('k', 'not a function'), { name: 'TypeError', message: /onReleased/ });
    await assert.rejects(store.prune(-1), { name: 'RangeError', message: /idleMs/ });
    await assert.rejects(store.prune('1h'), { name: 'TypeError', message: /idleMs/ });
    assert.equal(calls.length, 0, 'no statement was sent');
  });
});

// ---------------------------------------------------------------------------------
// the store contract
// ---------------------------------------------------------------------------------

describe('PostgresLockStore: the contract', () => {
  test('ensureSchema is idempotent, also when many run at once', async () => {
    const table = uniqueKey('schema_race');
    const racers = Array.from({ length: 6 }, () => new PostgresLockStore({ client: pool, table }));
    await Promise.all(racers.map((s) => s.ensureSchema()));
    await racers[0].ensureSchema();
    const { rows } = await admin.query(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`,
      [table],
    );
    assert.deepEqual(
      rows.map((r) => `${r.column_name} ${r.data_type}`),
      ['key_digest bytea', 'key text', 'owner text', 'expires_at timestamp with time zone', 'token bigint', 'permits jsonb'],
    );
    assert.ok((await racers[1].acquire('k', 'o', 1000)).fencingToken > 0);
  });

  test('ensureSchema names a table of the earlier shape (keyed on the key itself) instead of using it', async () => {
    const table = uniqueKey('old_shape');
    await admin.query(
      `CREATE TABLE "${table}" (key text PRIMARY KEY, owner text, expires_at timestamptz NOT NULL, token bigint NOT NULL)`,
    );
    const store = new PostgresLockStore({ client: pool, table });
    await assert.rejects(store.ensureSchema(), (err) => {
      assert.match(err.message, new RegExp(`"${table}" has no key_digest column`));
      assert.equal(err.cause?.code, '42703');
      return true;
    });
  });

  test('acquire, held, not reentrant; renew and release only by the owner', async () => {
    const store = newStore();
    const key = uniqueKey('contract');
    const first = await store.acquire(key, 'alice', 10_000);
    assert.ok(first && Number.isSafeInteger(first.fencingToken) && first.fencingToken > 0, `token ${first?.fencingToken}`);
    assert.equal(await store.acquire(key, 'bob', 10_000), undefined, 'held by alice');
    assert.equal(await store.acquire(key, 'alice', 10_000), undefined, 'not reentrant');
    assert.equal(await store.isLocked(key), true);
    const left = await store.ttl(key);
    assert.ok(left > 9000 && left <= 10_000, `ttl ${left}`);

    assert.equal(await store.renew(key, 'bob', 60_000), false, 'bob cannot renew');
    assert.equal(await store.renew(key, 'alice', 60_000), true);
    const renewed = await store.ttl(key);
    assert.ok(renewed > 59_000 && renewed <= 60_000, `ttl after renew ${renewed}`);

    assert.equal(await store.release(key, 'bob'), false, 'bob cannot release');
    assert.equal(await store.isLocked(key), true, "alice's lease is left alone");
    assert.equal(await store.release(key, 'alice'), true);
    assert.equal(await store.release(key, 'alice'), false, 'a second release finds nothing');
    assert.equal(await store.renew(key, 'alice', 1000), false, 'a released lease cannot be renewed');
    assert.equal(await store.isLocked(key), false);
    assert.equal(await store.ttl(key), undefined);

    // The row stays, owner cleared, token kept: the next token continues from it.
    const kept = await row('leasehold_locks', key);
    assert.equal(kept.owner, null);
    assert.equal(Number(kept.token), first.fencingToken);
    const second = await store.acquire(key, 'bob', 10_000);
    assert.ok(second.fencingToken > first.fencingToken, `${second.fencingToken} > ${first.fencingToken}`);
    assert.equal(await store.release(key, 'bob'), true);
  });

  test('expiry is judged by the database clock: a lapsed lease can be taken, and its holder can neither renew nor release', async () => {
    const store = newStore();
    const key = uniqueKey('expiry');
    const a = await store.acquire(key, 'a', 150);
    // The lease ends 150 ms after the database's own clock_timestamp(), whatever this process's clock says.
    const { rows } = await admin.query(
      `SELECT extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS left FROM leasehold_locks WHERE key = $1`,
      [key],
    );
    assert.ok(Number(rows[0].left) > 0 && Number(rows[0].left) <= 150, `database says ${rows[0].left} ms left`);
    assert.equal(await store.acquire(key, 'b', 150), undefined);
    await waitFor('the lease to lapse by the database clock', async () => !(await store.isLocked(key)), {
      timeoutMs: 2000,
      intervalMs: 10,
    });
    assert.equal(await store.ttl(key), undefined);
    assert.equal(await store.renew(key, 'a', 1000), false, 'a lapsed lease cannot be renewed');
    const b = await store.acquire(key, 'b', 5000);
    assert.ok(b.fencingToken > a.fencingToken, `token after expiry ${b.fencingToken} > ${a.fencingToken}`);
    assert.equal(await store.release(key, 'a'), false, 'the old holder cannot release the new lease');
    assert.equal(await store.renew(key, 'a', 1000), false);
    assert.equal(await store.isLocked(key), true);
    assert.equal(await store.release(key, 'b'), true);
  });

  test('the client clock plays no part: no statement carries a time from this process', async () => {
    const { client, calls } = recording(pool);
    const store = new PostgresLockStore({ client });
    const key = uniqueKey('no-client-clock');
    const realNow = Date.now;
    Date.now = () => realNow() + 3_600_000; // this process believes it is an hour later
    try {
      await store.acquire(key, 'o', 5000);
      assert.equal(await store.acquire(key, 'p', 5000), undefined, 'still held: only the database clock counts');
      assert.equal(await store.renew(key, 'o', 5000), true);
      assert.equal(await store.isLocked(key), true);
      assert.equal(await store.release(key, 'o'), true);
    } finally {
      Date.now = realNow;
    }
    for (const { values } of calls) {
      for (const v of values ?? []) assert.ok(typeof v === 'string' || (typeof v === 'number' && v === 5000), `value ${v}`);
    }
  });

  test('tokens strictly increase per key across release, expiry and pruned rows; keys are independent', async () => {
    const store = newStore();
    const key = uniqueKey('tokens');
    const other = uniqueKey('tokens-other');
    const tokens = [];
    for (let i = 0; i < 5; i++) {
      const t = await store.acquire(key, `o${i}`, 5000);
      tokens.push(t.fencingToken);
      assert.equal(await store.release(key, `o${i}`), true);
    }
    const lapsing = await store.acquire(key, 'lapse', 30);
    tokens.push(lapsing.fencingToken);
    await sleep(60);
    const afterExpiry = await store.acquire(key, 'next', 30);
    tokens.push(afterExpiry.fencingToken);
    await sleep(60);
    // The row is deleted (pruned): the next token still exceeds every earlier one.
    assert.ok((await store.prune(0)) >= 1);
    assert.equal(await row('leasehold_locks', key), undefined, 'the row was pruned');
    tokens.push((await store.acquire(key, 'after-prune', 5000)).fencingToken);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens ${tokens.join(' < ')}`);
    for (const t of tokens) assert.ok(Number.isSafeInteger(t), `safe integer ${t}`);
    // Another key has its own lease.
    assert.ok(await store.acquire(other, 'x', 5000));
    assert.equal(await store.isLocked(key), true);
    await store.release(key, 'after-prune');
    await store.release(other, 'x');
  });

  test('two owners racing for a free key: exactly one wins, many times over', async () => {
    const store = newStore();
    for (let round = 0; round < 30; round++) {
      const key = uniqueKey('race');
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => store.acquire(key, `o${i}`, 5000)));
      assert.equal(answers.filter(Boolean).length, 1, `round ${round}: ${JSON.stringify(answers)}`);
    }
  });

  test('prune deletes only keys free for long enough; live leases are never pruned', async () => {
    const table = uniqueKey('prune_t');
    const store = newStore({ table });
    await store.ensureSchema();
    await store.acquire('live', 'o', 60_000);
    await store.acquire('released', 'o', 60_000);
    await store.release('released', 'o');
    assert.equal(await store.prune(60_000), 0, 'nothing has been free for a minute');
    assert.equal(await store.prune(0), 1, 'the released key goes, the live one stays');
    assert.equal(await store.isLocked('live'), true);
  });

  test('awkward keys (long, quotes, Unicode, SQL) and an awkward table name in a schema', async () => {
    await admin.query('CREATE SCHEMA IF NOT EXISTS "lock schema"');
    const store = newStore({ schema: 'lock schema', table: 'locks"; DROP TABLE x; --' });
    await store.ensureSchema();
    const keys = ["it's", '"quoted"', 'a\nb', '🔒', 'ключ', '%_*', 'x'.repeat(10_000), "'); DROP TABLE leasehold_locks; --"];
    for (const key of keys) {
      const lease = await store.acquire(key, 'o', 5000);
      assert.ok(lease, `acquired ${key.slice(0, 20)}`);
      assert.equal(await store.acquire(key, 'p', 5000), undefined);
      assert.equal(await store.renew(key, 'o', 5000), true);
      assert.equal(await store.release(key, 'o'), true, `released ${key.slice(0, 20)}`);
    }
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "lock schema"."locks""; DROP TABLE x; --"`);
    assert.equal(rows[0].n, keys.length);
    assert.ok(await row('leasehold_locks', uniqueKey('still-there')) === undefined, 'the default table still exists');
  });

  test('database errors reject unchanged, and the engine wraps them in LockStoreError with the cause', async () => {
    let thrown;
    const spy = {
      query: (text, values) =>
        pool.query(text, values).catch((err) => {
          thrown = err;
          throw err;
        }),
    };
    const store = new PostgresLockStore({ client: spy, table: 'no_such_table' });
    const direct = await store.acquire('k', 'o', 1000).catch((err) => err);
    assert.equal(direct, thrown, 'the very error the client threw');
    assert.equal(direct.code, '42P01', 'undefined_table');
    for (const call of [() => store.renew('k', 'o', 1000), () => store.release('k', 'o'), () => store.isLocked('k'), () => store.ttl('k')]) {
      await assert.rejects(call(), (err) => err === thrown && err.code === '42P01');
    }

    let ran = false;
    const err = await lock({ key: 'k', store })
      .execute(() => {
        ran = true;
      })
      .catch((e) => e);
    assert.ok(err instanceof LockStoreError, `${err}`);
    assert.equal(err.key, 'k');
    assert.equal(err.method, 'acquire');
    assert.equal(err.cause, thrown);
    assert.equal(ran, false);
  });
});

// ---------------------------------------------------------------------------------
// one statement per operation
// ---------------------------------------------------------------------------------

describe('one statement per operation', () => {
  for (const notify of [true, false]) {
    test(`acquire, renew and release send one statement each (notify: ${notify})`, async () => {
      const { client, calls } = recording(pool);
      const store = new PostgresLockStore({ client, notify });
      const key = uniqueKey('one-statement');
      const count = async (fn) => {
        const before = calls.length;
        await fn();
        return calls.slice(before);
      };
      const acquired = await count(() => store.acquire(key, 'o', 5000));
      const held = await count(() => store.acquire(key, 'p', 5000));
      const renewed = await count(() => store.renew(key, 'o', 5000));
      const released = await count(() => store.release(key, 'o'));
      const notReleased = await count(() => store.release(key, 'o'));
      for (const [what, sent] of Object.entries({ acquired, held, renewed, released, notReleased })) {
        assert.equal(sent.length, 1, `${what}: one query call`);
        // One statement: no `;` outside the SQL text's string literals.
        assert.ok(!sent[0].text.replace(/'[^']*'/g, '').includes(';'), `${what}: a single statement`);
      }
      assert.equal(released[0].text.includes('pg_notify'), notify, 'the NOTIFY rides in the release statement');
    });
  }

  test('an execution through the engine costs two statements: acquire and release', async () => {
    const { client, calls } = recording(pool);
    const store = new PostgresLockStore({ client, notify: false });
    const value = await lock({ key: uniqueKey('engine-statements'), store, ttl: '30s' }).execute(() => getLockToken());
    assert.ok(value > 0);
    assert.equal(calls.length, 2, calls.map((c) => c.text.split('\n')[0]).join(' | '));
  });
});

// ---------------------------------------------------------------------------------
// a fleet of processes on one key, through the real engine
// ---------------------------------------------------------------------------------

const WORKER = fileURLToPath(new URL('./support/postgres-worker.mjs', import.meta.url));

function startWorker(url, key, count) {
  return startFleetWorker(WORKER, [url, key, String(count)]);
}

describe('a fleet of processes on one key', () => {
  const WORKERS = 8;
  const EACH = 50;

  test(`${WORKERS} processes x ${EACH} executions: one holder at a time, tokens increasing in holding order`, async (t) => {
    const key = 'nightly-settlement';
    await admin.query('CREATE TABLE fleet (key text PRIMARY KEY, inside int NOT NULL, peak int NOT NULL, runs int NOT NULL)');
    await admin.query('INSERT INTO fleet VALUES ($1, 0, 0, 0)', [key]);
    await new PostgresLockStore({ client: pool, table: 'fleet_locks' }).ensureSchema();
    const workers = [];
    try {
      for (let i = 0; i < WORKERS; i++) workers.push(startWorker(server.url, key, EACH));
      const ready = await within(FLEET_READY_MS, 'every worker connected', Promise.all(workers.map((w) => w.ready)));
      for (const r of ready) assert.equal(r.engine, engine, 'the workers run the same engine');
      const started = performance.now();
      for (const w of workers) w.go();
      const results = await within(FLEET_DONE_MS, 'the fleet finished', Promise.all(workers.map((w) => w.result)));
      const wall = performance.now() - started;
      t.diagnostic(
        `fleet wall time ${Math.round(wall)} ms for ${WORKERS * EACH} executions (${(wall / (WORKERS * EACH)).toFixed(2)} ms each); ` +
          `per worker: ${results.map((r) => `${r.elapsedMs} ms`).join(', ')}`,
      );
      const exits = await within(5000, 'the workers exited', Promise.all(workers.map((w) => w.exited)));
      assert.deepEqual(exits, workers.map(() => ({ code: 0, signal: null })));
      for (const r of results) {
        assert.deepEqual(r.errors, []);
        assert.equal(r.completed, EACH);
        assert.equal(r.max, 1, 'each worker always found itself alone');
      }
      const { rows } = await admin.query('SELECT inside, peak, runs FROM fleet WHERE key = $1', [key]);
      assert.deepEqual(rows[0], { inside: 0, peak: 1, runs: WORKERS * EACH }, 'never two holders at once');

      const all = results.flatMap((r) => r.records).sort((a, b) => a[0] - b[0]);
      assert.deepEqual(all.map(([position]) => position), Array.from({ length: all.length }, (_, i) => i + 1));
      for (let i = 1; i < all.length; i++) {
        assert.ok(all[i][1] > all[i - 1][1], `section ${all[i][0]}: token ${all[i][1]} > ${all[i - 1][1]}`);
      }
      t.diagnostic(`acquisitions per worker: ${results.map((r) => r.completed).join(', ')}`);
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    }
  });
});

// ---------------------------------------------------------------------------------
// fencing a stale holder in SQL
// ---------------------------------------------------------------------------------

describe('fencing tokens in SQL', () => {
  test("a stale holder's write is refused after a newer holder wrote", async () => {
    const store = newStore();
    const key = uniqueKey('account-42');
    await admin.query('CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL DEFAULT 0)');
    await admin.query('INSERT INTO accounts (id, balance) VALUES (42, 100)');
    /** The only way to write: guarded by the fencing token. */
    const write = async (token, balance) =>
      (await pool.query('UPDATE accounts SET balance = $1, fence = $2 WHERE id = 42 AND fence < $2', [balance, token])).rowCount === 1;

    // A takes the lease by hand, without renewal, and then "pauses" (a GC pause, a
    // stopped VM) for longer than its ttl.
    const stale = await acquireLock(store, key, '1s');
    assert.ok(stale);
    await sleep(1300);

    // B finds the key free (by the database clock) and writes under a newer token.
    const fresh = await lock({ key, store, ttl: '5s' }).execute(async () => {
      const token = getLockToken();
      assert.ok(await write(token, 150), 'the current holder writes');
      return token;
    });
    assert.ok(fresh > stale.fencingToken, `${fresh} > ${stale.fencingToken}`);

    // A wakes up and writes with its old token: refused by the database.
    assert.equal(await write(stale.fencingToken, 90), false, 'the stale write is refused');
    const { rows } = await admin.query('SELECT balance, fence::text AS fence FROM accounts WHERE id = 42');
    assert.deepEqual(rows[0], { balance: 150, fence: String(fresh) });
    assert.equal(await stale.release(), false, 'the stale lease had lapsed');
  });
});

// ---------------------------------------------------------------------------------
// wake-on-release through LISTEN/NOTIFY
// ---------------------------------------------------------------------------------

/**
 * The channel a store on the default table NOTIFYs and LISTENs on for `key` (as
 * PostgresLockStore names it): used to see when a LISTEN has taken effect.
 */
const channelOf = (key) => `leasehold_${createHash('md5').update(`"leasehold_locks"\u0000${key}`, 'utf8').digest('hex')}`;

/**
 * Holds `key` through `holderStore`; a waiter waits through `waiterStore` on a fake
 * clock, so it polls only when the test moves the clock: the test drives its tries to
 * 0, 50, 150, 350 and 750 ms (the next poll due at 1550 ms). With `listening`, it waits
 * until the waiter's LISTEN has taken effect. Then the holder releases, the clock
 * standing still at 750 ms. Resolves once the holder has settled, to the waiter's
 * execution, the fake instants of its tries, and the clock.
 */
async function handover(holderStore, waiterStore, key, { listening }) {
  const clock = new FakeTimeProvider();
  const tries = []; // fake ms of each try, recorded when the engine makes it
  let answered = 0;
  const waiterView = {
    acquire(...args) {
      tries.push(clock.now());
      return waiterStore.acquire(...args).finally(() => {
        answered += 1;
      });
    },
    renew: (...args) => waiterStore.renew(...args),
    release: (...args) => waiterStore.release(...args),
    subscribe: (...args) => waiterStore.subscribe(...args),
  };
  const holding = deferred();
  const release = deferred();
  const holder = lock({ key, store: holderStore, ttl: '30s' }).execute(async () => {
    holding.resolve();
    await release.promise;
  });
  await within(5000, 'the holder', holding.promise);
  const waiter = { ranAt: undefined };
  waiter.execution = new ResiliencePipelineBuilder({ timeProvider: clock })
    .addLock({ key, store: waiterView, ttl: '30s', wait: '10s' })
    .build()
    .execute(() => {
      waiter.ranAt = clock.now();
    });
  const answeredTries = (n) => waitFor(`the waiter's try ${n} answered`, () => answered >= n, { timeoutMs: 10_000, intervalMs: 2 });
  await answeredTries(1);
  for (const [i, delay] of [50, 100, 200, 400].entries()) {
    await flush(); // the engine has taken the answer and set its next poll
    await advance(clock, delay);
    await answeredTries(i + 2);
  }
  await flush();
  assert.deepEqual(tries, [0, 50, 150, 350, 750], 'the waiter polled, backing off');
  if (listening) {
    const channel = channelOf(key);
    await waitFor(
      "the waiter's LISTEN in effect",
      async () =>
        (await admin.query("SELECT 1 FROM pg_stat_activity WHERE state = 'idle' AND query LIKE '%LISTEN%' AND position($1 in query) > 0", [channel]))
          .rowCount > 0,
      { timeoutMs: 10_000, intervalMs: 5 },
    );
  }
  // Not run while the holder held the key. (Once it releases, a woken waiter may run
  // even before the holder's own execution has settled: the release's answer and its
  // NOTIFY race to this process.)
  assert.equal(waiter.ranAt, undefined);
  release.resolve();
  await within(5000, 'the holder settled', holder);
  return { waiter, tries, clock, lastPollAt: 750, nextPollAt: 1550 };
}

/** The waiter ran with the clock standing still at its last poll: the NOTIFY woke it. */
async function assertWoken(r) {
  await within(10_000, 'the waiter (the clock standing still)', r.waiter.execution);
  assert.equal(r.clock.now(), r.lastPollAt);
  assert.equal(r.waiter.ranAt, r.lastPollAt, 'woken long before its next poll');
  assert.deepEqual(r.tries, [0, 50, 150, 350, 750, 750], 'one try, at once, after the release');
}

describe('wake-on-release', () => {
  test('a waiter is woken by NOTIFY at once, long before its next poll', async () => {
    const store = newStore();
    assert.equal(store.canSubscribe, true, 'a store on a Pool can listen');
    await assertWoken(await handover(store, store, uniqueKey('wake'), { listening: true }));

    const polling = newStore({ notify: false });
    const polled = await handover(polling, polling, uniqueKey('poll'), { listening: false });
    // Without NOTIFY the waiter waits for its poll: no try up to 1 ms before it (a try
    // is recorded when the engine makes it), then the poll takes the key.
    await advance(polled.clock, polled.nextPollAt - polled.lastPollAt - 1);
    assert.deepEqual(polled.tries, [0, 50, 150, 350, 750], 'no wake-up without NOTIFY');
    await advance(polled.clock, 1);
    await within(10_000, 'the waiter, at its poll', polled.waiter.execution);
    assert.deepEqual(polled.tries, [0, 50, 150, 350, 750, 1550]);
    assert.equal(polled.waiter.ranAt, polled.nextPollAt);
  });

  test('across stores and connections: a release through one store wakes a waiter on another', async () => {
    const holderClient = await newClient();
    const listenClient = await newClient();
    const waiterClient = await newClient();
    const holderStore = new PostgresLockStore({ client: holderClient }); // a single Client: announces, cannot listen
    const waiterStore = new PostgresLockStore({ client: waiterClient, listenClient });
    stores.push(holderStore, waiterStore);
    assert.equal(holderStore.canSubscribe, false);
    assert.equal(waiterStore.canSubscribe, true);
    await assertWoken(await handover(holderStore, waiterStore, uniqueKey('cross'), { listening: true }));
  });

  /** A store whose listen connection records the statements it is sent (`calls`). */
  async function storeListeningThroughRecorder() {
    const raw = await newClient();
    const { client: listenClient, calls } = recording(raw);
    listenClient.on = raw.on.bind(raw);
    listenClient.removeListener = raw.removeListener.bind(raw);
    return { store: newStore({ listenClient }), calls };
  }

  test('channels are reference counted, listeners that throw are ignored, expiry is not announced', async () => {
    const { store, calls } = await storeListeningThroughRecorder();
    const key = uniqueKey('refcount');
    const seen = [];
    const stopThrowing = store.subscribe(key, () => {
      seen.push('thrower');
      throw new Error('a listener bug');
    });
    const stopA = store.subscribe(key, () => seen.push('a'));
    const stopB = store.subscribe(key, () => seen.push('b'));
    await waitFor('one LISTEN', () => calls.some((c) => /^LISTEN/.test(c.text)), { timeoutMs: 2000 });
    assert.equal(calls.filter((c) => /LISTEN/.test(c.text)).length, 1, 'one LISTEN for three listeners');

    await store.acquire(key, 'o', 5000);
    await store.release(key, 'o');
    await waitFor('all three listeners called', () => seen.length === 3, { timeoutMs: 2000 });
    assert.deepEqual(seen.sort(), ['a', 'b', 'thrower']);

    stopThrowing();
    stopA();
    stopA(); // idempotent
    // A marker: a listener on another key makes the store bring its LISTENs in line, one
    // pass at a time, so an UNLISTEN of `key` would be sent by then (or with it).
    const marker = uniqueKey('refcount-marker');
    const markerSeen = [];
    const stopMarker = store.subscribe(marker, () => markerSeen.push('marker'));
    await waitFor('the marker LISTEN', () => calls.filter((c) => /LISTEN/.test(c.text)).length === 2, { timeoutMs: 10_000 });
    assert.equal(calls.filter((c) => /UNLISTEN/.test(c.text)).length, 0, 'still listened to by b');
    seen.length = 0;
    await store.acquire(key, 'o', 40);
    // expires (by the database clock): not announced
    await waitFor('the lease expired', async () => (await store.acquire(key, 'p', 5000)) !== undefined, { timeoutMs: 10_000 });
    await store.release(key, 'p');
    await waitFor('b called once', () => seen.length === 1, { timeoutMs: 2000 });
    assert.deepEqual(seen, ['b']);

    stopB();
    await waitFor('one UNLISTEN', () => calls.some((c) => /^UNLISTEN/.test(c.text)), { timeoutMs: 2000 });
    await store.acquire(key, 'o', 5000);
    await store.release(key, 'o');
    // Notifications reach the listen connection in commit order: once the marker's
    // release (committed after) has been heard, one for `key` would have been too.
    assert.ok(await store.acquire(marker, 'o', 5000));
    await store.release(marker, 'o');
    await waitFor('the marker release heard', () => markerSeen.length === 1, { timeoutMs: 10_000 });
    assert.deepEqual(seen, ['b'], 'no listener left');
    stopMarker();
  });

  test('a waiter that leaves as the next arrives, in the same turn, keeps the LISTEN: no window without one', async () => {
    const { store, calls } = await storeListeningThroughRecorder();
    const key = uniqueKey('handover-listen');
    const stopFirst = store.subscribe(key, noop);
    await waitFor('the LISTEN', () => calls.some((c) => /^LISTEN/.test(c.text)), { timeoutMs: 2000 });
    let heard = 0;
    stopFirst();
    const stopSecond = store.subscribe(key, () => {
      heard += 1;
    });
    // A listener on another key: the store's next pass, after which an UNLISTEN of `key`
    // would have been sent.
    const stopMarker = store.subscribe(uniqueKey('handover-marker'), noop);
    await waitFor('the marker LISTEN', () => calls.filter((c) => /^LISTEN/.test(c.text)).length === 2, { timeoutMs: 2000 });
    assert.deepEqual(
      calls.filter((c) => /LISTEN/.test(c.text)).map((c) => c.text.split(' ')[0]),
      ['LISTEN', 'LISTEN'],
      'no UNLISTEN and LISTEN again of the key',
    );
    await store.acquire(key, 'o', 5000);
    await store.release(key, 'o');
    await waitFor('the second waiter woken', () => heard === 1, { timeoutMs: 2000 });
    stopSecond();
    stopMarker();
  });

  test('the listen connection dying is survived: no crash, a new one is opened, wake-ups resume', async () => {
    const localPool = new pg.Pool({ ...server.connectionOptions, max: 3, application_name: 'leasehold-listen-test' });
    localPool.on('error', noop);
    const store = new PostgresLockStore({ client: localPool });
    try {
      const key = uniqueKey('reconnect');
      let wakes = 0;
      const stop = store.subscribe(key, () => {
        wakes += 1;
      });
      const listeners = async () =>
        (
          await admin.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'leasehold-listen-test' AND query LIKE '%LISTEN%'",
          )
        ).rows.map((r) => r.pid);
      const [first] = await waitFor('a listen connection', async () => {
        const pids = await listeners();
        return pids.length === 1 ? pids : undefined;
      });
      await admin.query('SELECT pg_terminate_backend($1)', [first]);
      const [second] = await waitFor(
        'a new listen connection',
        async () => {
          const pids = await listeners();
          return pids.length === 1 && pids[0] !== first ? pids : undefined;
        },
        { timeoutMs: 5000, intervalMs: 50 },
      );
      assert.notEqual(second, first);
      await store.acquire(key, 'o', 5000);
      await store.release(key, 'o');
      await waitFor('the wake-up on the new connection', () => wakes === 1, { timeoutMs: 2000 });
      stop();
    } finally {
      await store.close();
      await localPool.end();
    }
  });

  test('close() closes the listen connection: pool.end() finishes', async () => {
    const application_name = uniqueKey('leasehold-close');
    const localPool = new pg.Pool({ ...server.connectionOptions, max: 2, application_name });
    localPool.on('error', noop);
    const store = new PostgresLockStore({ client: localPool });
    store.subscribe(uniqueKey('close'), noop);
    await waitFor('the listen connection', async () => (await backends(application_name)).length === 1, { timeoutMs: 2000 });
    await store.close();
    // Ended on the client's side; the server's backend goes a moment later.
    await waitFor('closed by close()', async () => (await backends(application_name)).length === 0, { timeoutMs: 2000 });
    assert.equal(store.subscribe('k', noop)(), undefined, 'subscribe is a no-op after close');
    await within(3000, 'pool.end()', localPool.end());
  });
});

describe('a waiter that gives up', () => {
  // The reproducer of the ghost-waiter issue: a waiter whose `wait` ran out (or whose
  // signal aborted) must not keep the key from the next try after the holder's release.
  // PostgreSQL waiters are not queued in the database; this holds on a Pool, a Client
  // with a listenClient (woken by NOTIFY) and a Client alone (polled).
  const SETUPS = [
    { name: 'a Pool', store: async () => newStore() },
    { name: 'a Client + listenClient', store: async () => newStore({ client: await newClient(), listenClient: await newClient() }) },
    { name: 'a Client alone', store: async () => newStore({ client: await newClient() }) },
  ];
  for (const setup of SETUPS) {
    test(`${setup.name}: after a wait ran out and a signal aborted, the release frees the key`, async () => {
      const s = await setup.store();
      await s.ensureSchema();
      const key = uniqueKey('give-up');
      const a = await acquireLock(s, key, 5000, { autoRenew: true });
      assert.ok(a);
      assert.equal(await acquireLock(s, key, 5000, { wait: 150 }), undefined, 'gave up at its wait');
      await assert.rejects(acquireLock(s, key, 5000, { wait: '30s', signal: AbortSignal.timeout(150) }), { name: 'TimeoutError' });
      assert.equal(await a.release(), true);
      const c = await acquireLock(s, key, 5000, { wait: 0 });
      assert.ok(c, 'the key was free right after the release');
      assert.ok(c.fencingToken > a.fencingToken);
      assert.equal(await c.release(), true);
    });
  }
});

describe('through the engine', () => {
  test('fail fast on a held key is a LockNotAcquiredError; the token in the callback is the row token', async () => {
    const store = newStore();
    const key = uniqueKey('engine');
    await lock({ key, store }).execute(async () => {
      const token = getLockToken();
      assert.equal(Number((await row('leasehold_locks', key)).token), token);
      await assert.rejects(lock({ key, store }).execute(noop), LockNotAcquiredError);
    });
    assert.equal(await store.isLocked(key), false, 'released when the callback settled');
  });
});

// ---------------------------------------------------------------------------------
// the listen connection of a store on a Pool
// ---------------------------------------------------------------------------------

describe('the listen connection of a store on a Pool', () => {
  test('is a connection of its own, outside the pool, closed once nobody has waited for a while', async () => {
    const application_name = uniqueKey('leasehold-linger');
    const localPool = new pg.Pool({ ...server.connectionOptions, max: 1, application_name });
    localPool.on('error', noop);
    const store = new PostgresLockStore({ client: localPool });
    try {
      const key = uniqueKey('linger');
      const stopFirst = store.subscribe(key, noop);
      const listening = async () => {
        const { rows } = await admin.query(
          "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
          [application_name],
        );
        return rows.length === 1 ? [rows[0].pid] : undefined;
      };
      const [listener] = await waitFor('the listen connection with its LISTEN', listening);
      assert.equal(localPool.totalCount, 0, 'not taken from the pool');
      stopFirst();
      // The next waiter on the key, soon after: it is woken through the same connection.
      let heard = 0;
      const stopSecond = store.subscribe(key, () => {
        heard += 1;
      });
      // Taken and released through another pool, whose connections are not counted here.
      const other = newStore();
      await other.acquire(key, 'o', 5000);
      await other.release(key, 'o');
      await waitFor('the second waiter woken', () => heard === 1, { timeoutMs: 5000 });
      assert.deepEqual(await backends(application_name), [listener], 'kept while a waiter follows another');
      stopSecond();
      await waitFor('the listen connection to close', async () => (await backends(application_name)).length === 0, {
        timeoutMs: 3000,
        intervalMs: 50,
      });
      // Waited for again: a new one.
      let wakes = 0;
      const stop = store.subscribe(key, () => {
        wakes += 1;
      });
      await waitFor('a new listen connection with its LISTEN', listening);
      await store.acquire(key, 'o', 5000);
      await store.release(key, 'o');
      await waitFor('the wake-up on the new connection', () => wakes === 1, { timeoutMs: 2000 });
      stop();
    } finally {
      await within(5000, 'store.close()', store.close());
      await within(5000, 'pool.end()', localPool.end());
    }
  });

  test('on a Pool of max 1 (serverless), a waiter does not starve the holder and itself of the only connection', async () => {
    const application_name = uniqueKey('leasehold-max-one');
    const localPool = new pg.Pool({ ...server.connectionOptions, max: 1, application_name });
    localPool.on('error', noop);
    const store = new PostgresLockStore({ client: localPool });
    const key = uniqueKey('max-one');
    try {
      const holding = deferred();
      const release = deferred();
      const holder = lock({ key, store, ttl: '2s' }).execute(async () => {
        holding.resolve();
        await release.promise;
        return 'holder';
      });
      await holding.promise;
      const waiter = lock({ key, store, ttl: '2s', wait: '3s' }).execute(() => 'waiter');
      // The waiter found the key held and listens for its release.
      await waitFor('the waiter listening', async () => {
        const { rows } = await admin.query(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
          [application_name],
        );
        return rows.length === 1;
      });
      release.resolve();
      const outcome = await within(
        6000,
        'the holder and the waiter',
        Promise.allSettled([holder, waiter]),
      );
      assert.deepEqual(
        outcome.map((o) => (o.status === 'fulfilled' ? o.value : `${o.reason?.name}: ${o.reason?.message}`)),
        ['holder', 'waiter'],
      );
    } finally {
      await within(5000, 'store.close()', store.close()).catch(noop);
      await within(5000, 'pool.end()', localPool.end()).catch(noop);
    }
  });

  test('leaves the pool usable: two stores on a Pool of max 2, each having had a waiter', async (t) => {
    const application_name = uniqueKey('leasehold-two-stores');
    const localPool = new pg.Pool({ ...server.connectionOptions, max: 2, application_name });
    localPool.on('error', noop);
    // Two stores on one pool (say, two tables, or a store made per module); each has had one waiter, long gone.
    const tables = [uniqueKey('two_stores_a'), uniqueKey('two_stores_b')];
    const twoStores = tables.map((table) => new PostgresLockStore({ client: localPool, table }));
    try {
      for (const s of twoStores) {
        await s.ensureSchema();
        const stop = s.subscribe('k', noop); // what the engine does for a waiter
        await waitFor('the waiter listening', async () => {
          const { rows } = await admin.query(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            [application_name],
          );
          return rows.length >= 1;
        });
        stop(); // the waiter got the lock, or gave up
      }
      t.diagnostic(`pool after the waiters left: total ${localPool.totalCount}, idle ${localPool.idleCount}, waiting ${localPool.waitingCount}`);
      const answer = await within(3000, 'an ordinary pool.query', localPool.query('SELECT 1 AS one')).catch((e) => e);
      assert.ok(!(answer instanceof Error), `${answer?.message}`);
      assert.equal(answer.rows[0].one, 1);
    } finally {
      await Promise.allSettled(twoStores.map((s) => within(5000, 'close', s.close())));
      await within(5000, 'pool.end()', localPool.end()).catch(noop);
    }
  });

  test('close() does not wait for a listen connection still being opened; one that arrives after close is closed at once', async () => {
    const proxy = await holdingProxy();
    const localPool = new pg.Pool({ ...server.connectionOptions, port: proxy.port, max: 1 });
    localPool.on('error', noop);
    const store = new PostgresLockStore({ client: localPool });
    try {
      store.subscribe(uniqueKey('close-pending'), noop); // the store starts opening its listen connection
      await waitFor('the connection to reach the proxy', () => proxy.connections.length === 1, { timeoutMs: 2000 });
      // Shutdown with the server slow to answer: close() returns without the connection.
      const closed = await within(1000, 'store.close()', store.close()).then(
        () => 'closed',
        (e) => e.message,
      );
      assert.equal(closed, 'closed');
      proxy.letThrough();
      const [connection] = proxy.connections;
      await within(3000, 'the late connection to be closed', connection.closed);
      assert.ok(connection.answered, 'the server answered: the connection was made, then closed');
    } finally {
      await within(5000, 'pool.end()', localPool.end()).catch(noop);
      await proxy.close();
    }
  });
});

// ---------------------------------------------------------------------------------
// keys
// ---------------------------------------------------------------------------------

describe('keys', () => {
  test('a long key that does not compress (3000 random characters) can be locked', async () => {
    const store = newStore();
    const key = `${uniqueKey('long')}:${Array.from({ length: 1500 }, () => Math.random().toString(36).slice(2, 4)).join('')}`;
    assert.ok(key.length > 3000);
    const lease = await store.acquire(key, 'o', 5000).catch((e) => e);
    assert.ok(!(lease instanceof Error), `acquire rejected: ${lease?.code} ${lease?.message}`);
    assert.ok(lease.fencingToken > 0);
    assert.equal(await store.acquire(key, 'p', 5000), undefined, 'held');
    assert.equal(await store.isLocked(key), true);
    assert.ok((await store.ttl(key)) > 0);
    assert.equal(await store.renew(key, 'o', 5000), true);
    assert.equal(await store.release(key, 'o'), true);
    assert.equal((await row('leasehold_locks', key)).key, key, 'the key is kept as it is, for inspection');
  });

  test('a row is found by the sha256 of the key: keys that differ only at the end are distinct', async () => {
    const store = newStore();
    const base = `${uniqueKey('digest')}:${'x'.repeat(5000)}`;
    const a = await store.acquire(`${base}a`, 'o', 5000);
    const b = await store.acquire(`${base}b`, 'o', 5000);
    assert.ok(a && b, 'both taken');
    const { rows } = await admin.query(
      `SELECT encode(key_digest, 'hex') AS digest FROM leasehold_locks WHERE key = $1`,
      [`${base}a`],
    );
    assert.equal(rows[0].digest, createHash('sha256').update(`${base}a`, 'utf8').digest('hex'));
    assert.equal(await store.release(`${base}a`, 'o'), true);
    assert.equal(await store.release(`${base}b`, 'o'), true);
  });

  test('keys and owners with a lone surrogate are refused (used directly, without the engine): they would collide', async () => {
    const store = newStore();
    const base = uniqueKey('surrogate');
    await assert.rejects(store.acquire(`${base}\uD800`, 'o', 5000), {
      name: 'TypeError',
      message: `key must be well-formed UTF-16 (a lone surrogate at index ${base.length}), got ${JSON.stringify(`${base}\uD800`)}`,
    });
    await assert.rejects(store.acquire(base, '\uDC00o', 5000), {
      name: 'TypeError',
      message: 'owner must be well-formed UTF-16 (a lone surrogate at index 0), got "\\udc00o"',
    });
    assert.throws(() => store.subscribe(`${base}\uDC00`, noop), { name: 'TypeError', message: /key must be well-formed UTF-16/ });
    // A surrogate pair is a character like any other.
    const lease = await store.acquire(`${base}\uD83D\uDD12`, '\uD83D\uDD11', 5000);
    assert.ok(lease.fencingToken > 0);
    assert.ok(await store.acquire(`${base}\uD83D\uDD13`, 'o', 5000), 'another key');
    assert.equal(await store.release(`${base}\uD83D\uDD12`, '\uD83D\uDD11'), true);
  });
});

// ---------------------------------------------------------------------------------
// isolation levels: statements that fail to serialize are run again
// ---------------------------------------------------------------------------------

describe('isolation levels', () => {
  for (const level of ['repeatable read', 'serializable']) {
    test(`under default_transaction_isolation = ${level}, racing acquires answer one lease and undefined, never reject`, async () => {
      const strictPool = new pg.Pool({
        ...server.connectionOptions,
        max: 6,
        options: `-c default_transaction_isolation=${level.replace(' ', '\\ ')}`,
      });
      strictPool.on('error', noop);
      try {
        const { rows } = await strictPool.query('SHOW transaction_isolation');
        assert.equal(rows[0].transaction_isolation, level);
        const store = new PostgresLockStore({ client: strictPool, notify: false });
        const failures = [];
        for (let round = 0; round < 200 && failures.length === 0; round++) {
          const key = uniqueKey('strict-race');
          const answers = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => store.acquire(key, `o${i}`, 5000)));
          for (const a of answers) if (a.status === 'rejected') failures.push(`round ${round}: ${a.reason.code} ${a.reason.message}`);
          const leases = answers.filter((a) => a.status === 'fulfilled' && a.value !== undefined).length;
          if (leases !== 1) failures.push(`round ${round}: ${leases} leases`);
        }
        assert.deepEqual(failures, []);
      } finally {
        await strictPool.end();
      }
    });
  }

  test('a statement that fails to serialize is run again, up to three times; then acquire answers undefined, renew and release reject', async () => {
    let failuresLeft = 0;
    const { client, calls } = recording({
      async query(text, values) {
        if (failuresLeft > 0) {
          failuresLeft -= 1;
          throw Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' });
        }
        return pool.query(text, values);
      },
    });
    const store = new PostgresLockStore({ client, notify: false });
    const key = uniqueKey('retried');
    const sent = async (fn) => {
      const before = calls.length;
      const answer = await fn().catch((e) => e);
      return { answer, statements: calls.length - before };
    };

    failuresLeft = 3;
    const taken = await sent(() => store.acquire(key, 'o', 5000));
    assert.ok(taken.answer.fencingToken > 0);
    assert.equal(taken.statements, 4, 'three failures, then the lease');
    failuresLeft = 4;
    assert.deepEqual(await sent(() => store.acquire(key, 'p', 5000)), { answer: undefined, statements: 4 });

    failuresLeft = 2;
    assert.deepEqual(await sent(() => store.renew(key, 'o', 5000)), { answer: true, statements: 3 });
    failuresLeft = 4;
    const renewed = await sent(() => store.renew(key, 'o', 5000));
    assert.equal(renewed.answer.code, '40001');
    assert.equal(renewed.statements, 4);

    failuresLeft = 4;
    const released = await sent(() => store.release(key, 'o'));
    assert.equal(released.answer.code, '40001');
    assert.equal(released.statements, 4);
    assert.equal(await store.isLocked(key), true, 'a release that failed released nothing');
    failuresLeft = 1;
    assert.deepEqual(await sent(() => store.release(key, 'o')), { answer: true, statements: 2 });

    // The advisory reads and prune are retried the same way.
    assert.ok(await store.acquire(key, 'q', 5000));
    failuresLeft = 3;
    assert.deepEqual(await sent(() => store.isLocked(key)), { answer: true, statements: 4 });
    failuresLeft = 2;
    const left = await sent(() => store.ttl(key));
    assert.ok(left.answer > 0 && left.answer <= 5000, String(left.answer));
    assert.equal(left.statements, 3);
    failuresLeft = 4;
    const read = await sent(() => store.ttl(key));
    assert.equal(read.answer.code, '40001');
    assert.equal(read.statements, 4);
    failuresLeft = 1;
    const pruned = await sent(() => store.prune(3_600_000));
    assert.equal(typeof pruned.answer, 'number');
    assert.equal(pruned.statements, 2);
  });

  test('other errors are not retried', async () => {
    const { client, calls } = recording({
      async query() {
        throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
      },
    });
    const store = new PostgresLockStore({ client, notify: false });
    await assert.rejects(store.acquire('k', 'o', 5000), { code: '40P01' });
    await assert.rejects(store.renew('k', 'o', 5000), { code: '40P01' });
    await assert.rejects(store.release('k', 'o'), { code: '40P01' });
    assert.equal(calls.length, 3);
  });

  test('through the engine under repeatable read: a waiter whose poll meets the release gets the lock, not a LockStoreError', async () => {
    const rrPool = new pg.Pool({
      ...server.connectionOptions,
      max: 8,
      options: '-c default_transaction_isolation=repeatable\\ read',
    });
    rrPool.on('error', noop);
    try {
      // Four stores, as four processes would have, on one key: short executions back to
      // back, waiters polling meanwhile, so polls meet other processes' acquires and releases.
      const fleet = Array.from({ length: 4 }, () => new PostgresLockStore({ client: rrPool, notify: false }));
      const key = uniqueKey('rr-engine');
      const runs = Array.from({ length: 24 }, (_, i) =>
        lock({ key, store: fleet[i % fleet.length], ttl: '2s', wait: '15s' }).settle(async () => {
          await sleep(5);
          return true;
        }),
      );
      const outcomes = await within(30_000, 'every execution', Promise.all(runs));
      const errors = outcomes.filter((o) => !o.ok).map((o) => `${o.error.name}: ${o.error.message} (cause ${o.error.cause?.code} ${o.error.cause?.message})`);
      assert.deepEqual(errors, []);
    } finally {
      await rrPool.end();
    }
  });
});
