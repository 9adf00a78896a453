// Faults of the world around a Redis lock (issue #7), against real servers only: a
// Redis restart that loses the data while SEVERAL leases are held (in this process and
// in another), a holder process paused with SIGSTOP past its ttl while another process
// takes the lock (a real PostgreSQL table fenced by the token stops its writes), and the
// holder's Redis connection dropped mid-renewal, briefly (no false loss) and for longer
// than the lease (a loss). ioredis and node-redis, with their DEFAULT reconnect
// behaviour. Nothing is mocked; every wait is bounded; no exact timing is asserted (the
// machine is shared). Run: node --test js-tests/redis-faults.test.mjs
// (LEASEHOLD_ENGINE=wasm runs it on the wasm engine.)

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import pg from 'pg';
import { engine, FakeTimeProvider, ResiliencePipelineBuilder, LockLostError, getLockToken } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { call, startRedisServer, waitFor } from './support/redis.mjs';
import { startPostgres } from './support/postgres.mjs';
import { within } from './support/async.mjs';
import { uniqueKey as unique } from './support/keys.mjs';
import { onLines } from './support/lines.mjs';
import { NAMED_CLIENTS } from './support/redis-clients.mjs';
import { advance, deferred, flush } from './support/time.mjs';

// Counted for the whole file: no fault here may leave a rejection unhandled.
const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

// ---------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------

const noop = () => {};
const ms = (x) => `${Math.round(x)} ms`;

/** Settles to `{ value }` or `{ error }`, never rejects. */
const outcomeOf = (promise) => promise.then((value) => ({ value }), (error) => ({ error }));

const KINDS = NAMED_CLIENTS;

// Everything opened here is closed in after().
const clients = []; // [kind, client]
const stores = [];
const children = [];
async function newClient(kind, port, name) {
  const client = await kind.connect(port, name);
  clients.push([kind, client]);
  return client;
}
function newStore(client) {
  const store = new RedisLockStore({ client, prefix: 'faults' });
  stores.push(store);
  return store;
}

/** The connections named `name` on the server at `port`: [{ id, flags, cmd }]. */
async function connectionsNamed(port, name) {
  const text = await call(port, ['CLIENT', 'LIST']);
  const out = [];
  for (const line of text.split('\n')) {
    const fields = Object.fromEntries(line.trim().split(' ').map((f) => [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)]));
    if (fields.name === name) out.push({ id: fields.id, flags: fields.flags, cmd: fields.cmd });
  }
  return out;
}

/** Drops every connection named `name` (CLIENT KILL ID); resolves to the ids dropped. */
async function dropConnections(port, name) {
  const ids = (await connectionsNamed(port, name)).map((c) => c.id);
  for (const id of ids) await call(port, ['CLIENT', 'KILL', 'ID', id]).catch(noop);
  return ids;
}

/**
 * Records the calls of `stores`' `renew` (at the fake time they were made) and keeps the
 * store calls not answered yet, so a test can wait for every answer.
 */
function trackCalls(stores, clock) {
  const calls = { renewedAt: [], pending: new Set() };
  for (const store of stores) {
    for (const method of ['acquire', 'renew', 'release']) {
      const original = store[method];
      store[method] = function (...args) {
        if (method === 'renew') calls.renewedAt.push(clock.now());
        const call = original.apply(this, args);
        calls.pending.add(call);
        const done = () => calls.pending.delete(call);
        call.then(done, done);
        return call;
      };
    }
  }
  return calls;
}

// ---- child processes --------------------------------------------------------------

const HOLDER = fileURLToPath(new URL('./support/fault-holder.mjs', import.meta.url));

/** Starts support/fault-holder.mjs; every stdout line is kept as { ...message, at }. */
function startHolder(args) {
  const child = spawn(process.execPath, [HOLDER, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
  children.push(child);
  const messages = [];
  const watchers = new Set();
  let stderr = '';
  onLines(child.stdout, (line) => {
    messages.push({ ...JSON.parse(line), at: performance.now() });
    for (const check of watchers) check();
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk.toString('utf8');
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let gone = false;
  exited.then(() => {
    gone = true;
    for (const check of watchers) check();
  });
  return {
    child,
    messages,
    exited,
    get stderr() {
      return stderr;
    },
    /** Resolves to the first message matching `match`, waiting up to `limit` ms for it. */
    message(what, match, limit) {
      return within(
        limit,
        `child: ${what}`,
        new Promise((resolve, reject) => {
          const check = () => {
            const found = messages.find(match);
            if (found) {
              watchers.delete(check);
              resolve(found);
            } else if (gone) {
              watchers.delete(check);
              reject(new Error(`child exited before ${what}:\n${stderr}`));
            }
          };
          watchers.add(check);
          check();
        }),
      );
    },
  };
}

// ---------------------------------------------------------------------------------
// servers
// ---------------------------------------------------------------------------------

let restartServer; // restarted (data lost) by test 1
let dropServer; // connections dropped by test 3a; also the lock of test 2
let pauseServer; // paused past the lease by test 3b
let postgres; // the fenced resource of test 2
let admin;

before(async () => {
  [restartServer, dropServer, pauseServer, postgres] = await Promise.all([
    startRedisServer(),
    startRedisServer(),
    startRedisServer(),
    startPostgres(),
  ]);
  admin = new pg.Client(postgres.connectionOptions);
  admin.on('error', noop);
  await admin.connect();
});

after(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); // stopped or not
  }
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const [kind, client] of clients) kind.close(client);
  await admin?.end().catch(noop);
  await Promise.allSettled([restartServer?.stop(), dropServer?.stop(), pauseServer?.stop(), postgres?.stop()]);
  assert.deepEqual(unhandled, [], 'no unhandled rejection in the whole file');
});

test(`the engine in use is the one asked for (${engine})`, () => {
  assert.equal(engine, process.env.LEASEHOLD_ENGINE || 'native');
});

// ---------------------------------------------------------------------------------
// 1. Redis restarts without persistence while several leases are held
// ---------------------------------------------------------------------------------

describe('Redis restarts without persistence while several leases are held', () => {
  test('5 holders here (ioredis and node-redis) and 1 in a child process each lose their lease by their next renewal, once; later tokens are larger', async (t) => {
    const TTL = 3000; // renewals every 1000 ms
    const port = restartServer.port;
    const io = newStore(await newClient(KINDS.ioredis, port, unique('restart-io')));
    const nr = newStore(await newClient(KINDS['node-redis'], port, unique('restart-nr')));

    // The child holder first: it has a process to start.
    const childKey = unique('restart-child');
    const child = startHolder(['hold', 'node-redis', String(port), childKey, `${TTL}ms`]);
    await child.message('ready', (m) => m.ready, 10_000);

    // The holders here run on a fake clock: renewals (every 1000 ms) come when the test
    // moves it, so the restart falls between two renewals by construction, and a later
    // renewal or expiry can be run for sure before checking that nothing more was
    // reported. The child holder runs on the real clock.
    const clock = new FakeTimeProvider();
    const calls = trackCalls([io, nr], clock);
    const pastOldLease = deferred();
    const old = []; // every token issued before the restart
    const holders = [];
    for (let i = 0; i < 5; i++) {
      const key = unique('restart');
      const store = i % 2 === 0 ? io : nr;
      // Holders 3 and 4 ignore their signal and carry on well past the loss.
      const ignores = i >= 3;
      const h = { key, kind: i % 2 === 0 ? 'ioredis' : 'node-redis', ignores, lostCalls: [], events: [] };
      h.pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => h.events.push({ ...e, at: clock.now() }) })
        .addLock({ key, store, ttl: TTL, onLockLost: (info) => h.lostCalls.push(info) })
        .build();
      for (let j = 0; j < 2; j++) old.push(await h.pipeline.execute(() => getLockToken()));
      const holding = deferred();
      h.outcome = outcomeOf(
        h.pipeline.execute(async (context) => {
          h.context = context;
          old.push(getLockToken());
          holding.resolve();
          await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
          h.abortedAt = clock.now();
          h.reason = context.signal.reason;
          if (!ignores) throw new Error('stopped: the lease is gone');
          await pastOldLease.promise; // the clock past where the old lease would have ended
          return 'finished anyway';
        }),
      );
      await within(3000, `holder ${i} started`, holding.promise);
      holders.push(h);
    }
    old.push((await child.message('holding', (m) => m.holding, 5000)).token);

    // Every holder past its first renewal: the restart comes mid-lease.
    await advance(clock, 1000);
    await waitFor('every holder renewed once', () => holders.every((h) => h.events.some((e) => e.type === 'renewed')), {
      timeoutMs: 10_000,
      intervalMs: 2,
    });
    await child.message('renewed', (m) => m.renewed, 4000);
    assert.ok(holders.every((h) => h.abortedAt === undefined), 'all still holding before the restart');

    const restartStarted = performance.now();
    await restartServer.restart();
    const restarted = performance.now();
    assert.equal(await call(port, ['DBSIZE']), 0, 'the restarted server lost every key');
    // Both clients back (their commands wait for the reconnect), before the next renewal.
    await within(10_000, 'ioredis reconnected', io.isLocked(unique('probe')));
    await within(10_000, 'node-redis reconnected', nr.isLocked(unique('probe')));
    await flush();
    assert.ok(holders.every((h) => h.abortedAt === undefined), 'not lost before the next renewal');

    // The next renewal, at 2000 ms, finds every lease gone.
    await advance(clock, 999);
    assert.equal(calls.renewedAt.length, 5, 'no renewal before it is due (5 holders renewed once)');
    await advance(clock, 1);
    assert.equal(calls.renewedAt.length, 10);
    const settledHere = Promise.all(holders.filter((h) => !h.ignores).map((h) => h.outcome));
    await within(10_000, 'every holder that stops settled', settledHere);
    await waitFor('every holder told of its loss', () => holders.every((h) => h.abortedAt !== undefined), { timeoutMs: 10_000, intervalMs: 2 });
    // Past where the old leases would have ended (3000 ms after the renewal at 1000 ms),
    // and past later renewal instants: a second loss report would come from one of them.
    await advance(clock, 10_000, 500);
    pastOldLease.resolve();
    const outcomes = await within(10_000, 'every holder settled', Promise.all(holders.map((h) => h.outcome)));
    const childLost = await child.message('lost', (m) => m.lost, 5000);
    const bound = TTL / 3 + 1000;
    for (const [i, h] of holders.entries()) {
      const { value, error } = outcomes[i];
      assert.ok(h.reason instanceof LockLostError, `holder ${i}: abort reason ${h.reason?.name}`);
      assert.equal(h.reason.key, h.key);
      assert.equal(h.abortedAt, 2000, `holder ${i} (${h.kind}) lost at its first renewal after the restart`);
      if (h.ignores) {
        assert.equal(value, 'finished anyway', `holder ${i}: a callback that succeeds after the loss returns its value`);
      } else {
        assert.ok(error instanceof LockLostError, `holder ${i}: ${error?.name}: ${error?.message}`);
        assert.equal(error.key, h.key);
        assert.match(String(error.cause?.message), /stopped: the lease is gone/);
      }
    }
    const childLostAfter = childLost.at - restarted;
    assert.equal(childLost.reason, 'LockLostError');
    assert.ok(childLost.at > restartStarted);
    assert.ok(childLostAfter < bound + 200, `child lost ${ms(childLostAfter)} after the server was back (as seen here)`);
    t.diagnostic(`restart took ${ms(restarted - restartStarted)}; the child lost its lease ${ms(childLostAfter)} after the server was back`);

    // Every store call made while the clock ran has been answered: a second report, from
    // a later renewal or the expiry, would have come by now.
    await waitFor('every store call answered', () => calls.pending.size === 0, { timeoutMs: 10_000, intervalMs: 2 });
    await flush();
    assert.equal(calls.renewedAt.length, 10, 'no renewal after the loss');
    for (const [i, h] of holders.entries()) {
      assert.equal(h.lostCalls.length, 1, `holder ${i}: onLockLost called exactly once`);
      assert.equal(h.lostCalls[0].key, h.key);
      assert.equal(h.lostCalls[0].context, h.context);
      assert.equal(h.events.filter((e) => e.type === 'lost').length, 1, `holder ${i}: one lost event`);
    }

    // The child: lost once, its execution rejected, then a new execution worked, and it
    // exited cleanly with no unhandled rejection.
    const settled = await child.message('settled', (m) => m.settled, 3000);
    assert.equal(settled.error, 'LockLostError');
    assert.match(String(settled.cause), /stopped: the lease is gone/);
    const childNext = (await child.message('next', (m) => m.next, 8000)).token;
    const done = await child.message('done', (m) => m.done, 3000);
    assert.deepEqual({ onLockLost: done.onLockLost, lostEvents: done.lostEvents, unhandled: done.unhandled }, {
      onLockLost: 1,
      lostEvents: 1,
      unhandled: 0,
    });
    assert.deepEqual(await within(5000, 'the child exited', child.exited), { code: 0, signal: null });

    // This process keeps working: a new execution on every key, each token larger than
    // every token issued before the restart (the store's TIME floor).
    const maxOld = Math.max(...old);
    const fresh = [childNext];
    for (const h of holders) fresh.push(await within(5000, 'a new execution', h.pipeline.execute(() => getLockToken())));
    for (const token of fresh) assert.ok(Number.isSafeInteger(token) && token > maxOld, `new token ${token} > ${maxOld}`);
    assert.deepEqual(unhandled, [], 'no unhandled rejection');
  });
});

// ---------------------------------------------------------------------------------
// 2. A holder paused past its ttl: the fence refuses its writes
// ---------------------------------------------------------------------------------

describe('a holder process paused (SIGSTOP) past its ttl while another process takes the lock', () => {
  // The resource: a row written only through the fence. `fence <= $2`, not `<`: a
  // holder writes many times under one token (the paused one does, before its pause),
  // and tokens are unique per key, so equality can only be the current holder itself;
  // any OLDER token than the last one written is refused. (With `<` each token could
  // write once.) A fence only refuses a token older than one it has seen: the new
  // holder writes before the paused one resumes, as it would in real life at any
  // time after taking the lock.
  const WRITE = 'UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2';

  test('every write of the resumed holder is refused by the fencing token in SQL; the new holder writes', async (t) => {
    const TTL = 1000;
    const PAUSE = 2500;
    const account = 7;
    await admin.query('CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL DEFAULT 0)');
    await admin.query('INSERT INTO accounts (id, balance) VALUES ($1, 100)', [account]);
    const key = unique(`account-${account}`);
    const store = newStore(await newClient(KINDS.ioredis, dropServer.port, unique('fence-io')));

    const paused = startHolder(['stale-writer', 'ioredis', String(dropServer.port), postgres.url, key, `${TTL}ms`, String(account)]);
    await paused.message('ready', (m) => m.ready, 10_000);
    const staleToken = (await paused.message('holding', (m) => m.holding, 5000)).token;
    await paused.message('3 writes', (m) => m.write && m.n === 3, 5000);

    // Stop it, holding its lease, with no write on its way (it sleeps 100 ms between writes).
    const stoppedAt = Date.now();
    const stoppedPerf = performance.now();
    assert.ok(paused.child.kill('SIGSTOP'));

    // Another process (this one) waits for the lock: it gets it once the paused
    // holder's lease runs out in Redis, and writes under its newer token.
    const freshWrites = [];
    const firstWrite = deferred();
    const staleTried = deferred();
    const write = async (balance, token) => (await admin.query(WRITE, [balance, token, account])).rowCount === 1;
    const fresh = new ResiliencePipelineBuilder()
      .addLock({ key, store, ttl: '5s', wait: '5s' })
      .build()
      .execute(async () => {
        const token = getLockToken();
        const acquiredAfter = performance.now() - stoppedPerf;
        freshWrites.push(await write(2001, token));
        firstWrite.resolve();
        await staleTried.promise; // still holding while the paused one writes
        freshWrites.push(await write(2002, token));
        return { token, acquiredAfter };
      });
    const freshOutcome = outcomeOf(fresh);
    await within(4000, 'the new holder wrote', firstWrite.promise);

    // (A timer may fire a millisecond early by this clock: loop until really due.)
    while (performance.now() - stoppedPerf < PAUSE) await sleep(Math.max(1, PAUSE - (performance.now() - stoppedPerf)));
    const contAt = Date.now();
    const pausedFor = performance.now() - stoppedPerf;
    assert.ok(paused.child.kill('SIGCONT'));

    // The resumed holder keeps writing with its old token: at least three tries.
    await paused.message('3 writes after the pause', () => paused.messages.filter((m) => m.write && m.sentAt >= contAt).length >= 3, 4000);
    staleTried.resolve();
    const { value: freshResult, error: freshError } = await within(4000, 'the new holder finished', freshOutcome);
    assert.equal(freshError, undefined, `the new holder: ${freshError}`);
    paused.child.stdin.end('stop\n');
    const settled = await paused.message('settled', (m) => m.settled, 4000);
    const done = await paused.message('done', (m) => m.done, 4000);
    assert.deepEqual(await within(5000, 'the paused holder exited', paused.exited), { code: 0, signal: null });

    const writes = paused.messages.filter((m) => m.write);
    const prePause = writes.filter((w) => w.sentAt < stoppedAt);
    const during = writes.filter((w) => w.sentAt >= stoppedAt + 50 && w.sentAt < contAt);
    const stale = writes.filter((w) => w.sentAt >= contAt);
    const staleAccepted = stale.filter((w) => w.accepted);
    t.diagnostic(
      `paused ${ms(pausedFor)} (ttl ${TTL} ms); new holder acquired ${ms(freshResult.acquiredAfter)} after the stop; ` +
        `paused holder: ${prePause.length} writes before (${prePause.filter((w) => w.accepted).length} accepted), ` +
        `${stale.length} after the pause (${staleAccepted.length} accepted; ${stale.filter((w) => !w.aborted).length} sent ` +
        `before it saw its signal aborted); its execution ${settled.error ? `rejected: ${settled.error}` : `returned ${settled.value}`}`,
    );

    assert.ok(pausedFor > 2 * TTL, `paused for longer than its ttl (${ms(pausedFor)})`);
    assert.ok(freshResult.token > staleToken, `new token ${freshResult.token} > the paused holder's ${staleToken}`);
    assert.ok(prePause.length >= 3 && prePause.every((w) => w.accepted), 'before the pause its writes were accepted');
    assert.deepEqual(during, [], 'nothing was sent while the holder was stopped');
    assert.ok(stale.length >= 3, `it tried to write after resuming (${stale.length} tries)`);
    assert.ok(stale.every((w) => w.token === staleToken), 'with its old token');
    assert.equal(staleAccepted.length, 0, 'stale writes accepted');
    assert.deepEqual(freshWrites, [true, true], "the new holder's writes are accepted");
    const { rows } = await admin.query('SELECT balance, fence::text AS fence FROM accounts WHERE id = $1', [account]);
    assert.deepEqual(rows[0], { balance: 2002, fence: String(freshResult.token) });

    // The paused holder learnt of its loss once, and its callback (which succeeded,
    // ignoring the signal) returned its value.
    assert.equal(settled.error, undefined, `its execution: ${settled.error}`);
    assert.equal(settled.value, writes.length);
    assert.deepEqual({ onLockLost: done.onLockLost, lostEvents: done.lostEvents, unhandled: done.unhandled }, {
      onLockLost: 1,
      lostEvents: 1,
      unhandled: 0,
    });
  });
});

// ---------------------------------------------------------------------------------
// 3. The holder's connection dropped mid-renewal
// ---------------------------------------------------------------------------------

/**
 * Wraps `store.renew` on the instance (the object stays the real store) to record
 * every renewal (when the engine sent it, its answer or error) and run `before(entry)`
 * just before a renewal goes out and `around(entry)` while it is in flight.
 */
function instrumentRenew(store, { before: beforeRenew = async () => {}, around = async () => {} } = {}) {
  const renewals = [];
  const original = store.renew;
  store.renew = async function renew(...args) {
    const entry = { at: performance.now(), answer: undefined, error: undefined, answeredAt: undefined };
    renewals.push(entry);
    await beforeRenew(entry);
    const pending = original.apply(this, args);
    pending.catch(noop);
    await around(entry);
    try {
      entry.answer = await pending;
      return entry.answer;
    } catch (error) {
      entry.error = error;
      throw error;
    } finally {
      entry.answeredAt = performance.now();
    }
  };
  return renewals;
}

describe("the holder's Redis connection dropped mid-renewal", () => {
  /**
   * Drop 1: CLIENT KILL right before renewal 1 goes out. Drop 2: renewal 2 held at the
   * server (CLIENT PAUSE WRITE: the script waits, flag `b`), then its connection killed
   * under it. The lease (3 s) stays valid throughout; nothing may be lost.
   */
  async function briefDrops(kind) {
    const TTL = 3000;
    const port = dropServer.port;
    const name = unique(`drop-${kind.name}`);
    const store = newStore(await newClient(kind, port, name));
    const key = unique(`drop-${kind.name}`);
    const drops = [];
    // Drop 1 before the first renewal; drop 2 on the first renewal that starts after one
    // succeeded past drop 1 (a scheduled renewal, not a retry of a failed one).
    let stage = 0;
    const renewals = instrumentRenew(store, {
      async before(entry) {
        if (stage === 0) {
          stage = 1;
          drops.push({ ids: await dropConnections(port, name), at: performance.now() });
        } else if (stage === 1 && renewals.some((x) => x.answer === true && x.answeredAt > drops[0].at)) {
          stage = 2;
          entry.dropInFlight = true;
          await call(port, ['CLIENT', 'PAUSE', '1000', 'WRITE']);
        }
      },
      async around(entry) {
        if (!entry.dropInFlight) return;
        const blocked = await waitFor('renewal 2 waiting at the server', async () => {
          const [c] = await connectionsNamed(port, name);
          return c?.flags.includes('b');
        }, { timeoutMs: 900, intervalMs: 5 }).catch(() => false);
        drops.push({ blocked, ids: await dropConnections(port, name), at: performance.now() });
      },
    });
    const events = [];
    const lost = [];
    let signal;
    let owner;
    const result = await within(
      12_000,
      `${kind.name}: the holder finished`,
      new ResiliencePipelineBuilder({ telemetry: (e) => events.push({ ...e, at: performance.now() }) })
        .addLock({ key, store, ttl: TTL, onLockLost: (info) => lost.push(info) })
        .build()
        .execute(async (context) => {
          signal = context.signal;
          owner = await call(port, ['GET', `faults:{${key}}`]);
          await waitFor('both drops done', () => drops.length === 2, { timeoutMs: 4000 });
          // Three renewal periods after the second drop.
          const until = drops[1].at + 3 * (TTL / 3);
          while (performance.now() < until && !signal.aborted) await sleep(50);
          return {
            aborted: signal.aborted,
            idsNow: (await connectionsNamed(port, name)).map((c) => c.id),
            leaseOwner: await call(port, ['GET', `faults:{${key}}`]),
            pttl: await call(port, ['PTTL', `faults:{${key}}`]),
          };
        }),
    );
    return { kind: kind.name, key, TTL, drops, renewals, events, lost, signal, owner, result };
  }

  test('a brief drop (ioredis and node-redis, default reconnect): renewal retries, recovers, no false loss', async (t) => {
    const runs = await Promise.all([briefDrops(KINDS.ioredis), briefDrops(KINDS['node-redis'])]);
    for (const r of runs) {
      const failed = r.renewals.filter((x) => x.error);
      t.diagnostic(
        `${r.kind}: drop 1 before a renewal, drop 2 with a later renewal ${r.drops[1].blocked ? 'waiting at the server' : 'NOT seen at the server'}; ` +
          `renewals: ${r.renewals.map((x) => (x.error ? `failed (${x.error.constructor?.name}: ${x.error.message})` : `${x.answer} in ${ms(x.answeredAt - x.at)}`)).join(', ')}`,
      );
      assert.equal(r.drops[0].ids.length, 1, `${r.kind}: drop 1 killed the holder's connection`);
      assert.equal(r.drops[1].ids.length, 1, `${r.kind}: drop 2 killed the holder's (new) connection`);
      assert.notEqual(r.drops[0].ids[0], r.drops[1].ids[0], `${r.kind}: the client had reconnected in between`);
      assert.ok(r.drops[1].blocked, `${r.kind}: drop 2 came while renewal 2 was at the server`);
      assert.ok(r.result.idsNow.length === 1 && !r.drops.some((d) => d.ids.includes(r.result.idsNow[0])), `${r.kind}: reconnected again`);

      assert.equal(r.result.aborted, false, `${r.kind}: signal not aborted 3 renewal periods after the drops`);
      assert.equal(r.signal.aborted, false, `${r.kind}: not aborted up to the end`);
      assert.deepEqual(r.lost, [], `${r.kind}: onLockLost never called`);
      assert.equal(r.events.filter((e) => e.type === 'lost').length, 0);
      assert.ok(r.renewals.every((x) => x.error !== undefined || x.answer === true), `${r.kind}: no renewal answered false`);
      // Every failed renewal was retried while the lease was valid, and a later one succeeded.
      for (const f of failed) {
        assert.ok(r.renewals.some((x) => x.at > f.at && x.answer === true), `${r.kind}: a failed renewal was followed by a successful one`);
      }
      const afterDrop2 = r.renewals.filter((x) => x.at > r.drops[1].at && x.answer === true);
      assert.ok(afterDrop2.length >= 2, `${r.kind}: renewals kept succeeding after the drops (${afterDrop2.length})`);
      assert.equal(r.result.leaseOwner, r.owner, `${r.kind}: the lease in Redis is still the holder's`);
      assert.ok(r.result.pttl > 0, `${r.kind}: and live (${r.result.pttl} ms left)`);
      assert.equal(await call(dropServer.port, ['EXISTS', `faults:{${r.key}}`]), 0, `${r.kind}: released at the end`);
    }
    // node-redis rejects a command in flight on a dropped socket: the engine's retry is
    // what saved the lease there. (ioredis resends it itself after reconnecting.)
    const nr = runs.find((r) => r.kind === 'node-redis');
    assert.ok(nr.renewals.some((x) => x.error), 'node-redis: at least one renewal failed and was retried');
    assert.ok(nr.events.some((e) => e.type === 'renewalFailed'), 'node-redis: reported as renewalFailed');
    assert.deepEqual(unhandled, []);
  });

  test('a drop longer than the lease (connection killed again and again, renewals held at the server) is a loss', async (t) => {
    const TTL = 1500; // renewals every 500 ms
    const PAUSE = 3500;
    const port = pauseServer.port;
    const holders = [];
    for (const kind of [KINDS.ioredis, KINDS['node-redis']]) {
      const name = unique(`cut-${kind.name}`);
      const store = newStore(await newClient(kind, port, name));
      const key = unique(`cut-${kind.name}`);
      const h = { kind: kind.name, name, key, store, lost: [], events: [] };
      h.renewals = instrumentRenew(store);
      h.pipeline = new ResiliencePipelineBuilder({ telemetry: (e) => h.events.push({ ...e, at: performance.now() }) })
        .addLock({ key, store, ttl: TTL, onLockLost: (info) => h.lost.push(info) })
        .build();
      const holding = deferred();
      h.outcome = outcomeOf(
        h.pipeline.execute(async (context) => {
          h.token = getLockToken();
          holding.resolve();
          await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
          h.abortedAt = performance.now();
          h.reason = context.signal.reason;
          throw new Error('stopped: the lease is gone');
        }),
      );
      await within(3000, `${kind.name} holding`, holding.promise);
      holders.push(h);
    }
    await waitFor('a successful renewal each', () => holders.every((h) => h.renewals.some((x) => x.answer === true)), {
      timeoutMs: 3000,
    });

    // From now on no renewal can run at the server, and every connection the holders
    // open is killed within ~100 ms, for more than twice the lease.
    const pauseAt = performance.now();
    await call(port, ['CLIENT', 'PAUSE', String(PAUSE), 'WRITE']);
    const kills = new Map(holders.map((h) => [h.name, 0]));
    let cutting = true;
    const cutter = (async () => {
      while (cutting && performance.now() < pauseAt + PAUSE - 100) {
        for (const h of holders) kills.set(h.name, kills.get(h.name) + (await dropConnections(port, h.name)).length);
        await sleep(100);
      }
    })();
    try {
      const outcomes = await within(TTL + 3000, 'both holders lost their lease', Promise.all(holders.map((h) => h.outcome)));
      const lines = [];
      for (const [i, h] of holders.entries()) {
        const { error } = outcomes[i];
        assert.ok(error instanceof LockLostError, `${h.kind}: ${error?.name}: ${error?.message}`);
        assert.ok(h.reason instanceof LockLostError, `${h.kind}: abort reason ${h.reason?.name}`);
        // The last renewal that worked went out before the pause; the lease runs out ttl
        // after it: not before (no early loss), and not long after (bounded).
        const lastOk = Math.max(...h.renewals.filter((x) => x.answer === true && x.at < pauseAt).map((x) => x.at));
        const lostAfterLastOk = h.abortedAt - lastOk;
        const lostAfterPause = h.abortedAt - pauseAt;
        const tried = h.renewals.filter((x) => x.at > pauseAt);
        lines.push(
          `${h.kind}: lost ${ms(lostAfterPause)} after the cut (${ms(lostAfterLastOk)} after the last good renewal was sent); ` +
            `${tried.length} renewals tried meanwhile, ${tried.filter((x) => x.error).length} failed, ${tried.filter((x) => !x.answeredAt).length} unanswered`,
        );
        assert.ok(lostAfterLastOk >= TTL - 100, `${h.kind}: not lost before the lease ran out (${ms(lostAfterLastOk)})`);
        assert.ok(lostAfterPause < TTL + 1500, `${h.kind}: lost within ttl + margin of the cut (${ms(lostAfterPause)})`);
        assert.ok(tried.length >= 1, `${h.kind}: renewal was attempted during the cut`);
        assert.ok(tried.every((x) => x.answer !== true), `${h.kind}: no renewal succeeded during the cut`);
      }
      t.diagnostic(`${lines.join('; ')}; connections killed: ${[...kills.values()].join(', ')}`);
    } finally {
      cutting = false;
      await cutter;
    }
    const left = pauseAt + PAUSE - performance.now();
    if (left > 0) await sleep(left + 50);
    await call(port, ['CLIENT', 'UNPAUSE']);

    await sleep(200); // a second report would come from a late answer
    for (const h of holders) {
      assert.equal(h.lost.length, 1, `${h.kind}: onLockLost called exactly once`);
      assert.equal(h.events.filter((e) => e.type === 'lost').length, 1, `${h.kind}: one lost event`);
    }
    // Once the store is back, the key can be taken again, with a larger token.
    for (const h of holders) {
      const next = await within(8000, `${h.kind}: a new execution`, new ResiliencePipelineBuilder()
        .addLock({ key: h.key, store: h.store, ttl: TTL, wait: '5s' })
        .build()
        .execute(() => getLockToken()));
      assert.ok(next > h.token, `${h.kind}: new token ${next} > ${h.token}`);
    }
    assert.deepEqual(unhandled, []);
  });
});
