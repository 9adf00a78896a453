// Permits on RedisLockStore through the engine, across processes, on a real Redis
// server: pipelines with `limit` in several processes (ioredis and node-redis, weights 1
// and 2) never have more than the limit inside, readers and writers (`mode`) in several
// processes never meet a writer inside, and a holder SIGKILLed (or paused past
// its ttl) frees its permits for the next waiter, whose token then refuses the old
// holder's late fenced write.
// Run: node --test js-tests/redis-permits-engine.test.mjs (LEASEHOLD_ENGINE=wasm too).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { ResiliencePipelineBuilder, getLockToken, engine } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';
import { call, startRedisServer } from './support/redis.mjs';
import { noUnhandledRejections, pollUntil, within } from './support/async.mjs';
import { startFleetWorker, FLEET_READY_MS, FLEET_DONE_MS } from './support/fleet.mjs';
import { onLines } from './support/lines.mjs';
import { closeIoredis, closeNodeRedis, connectIoredis, connectNodeRedis } from './support/redis-clients.mjs';
import { fencedWrite } from './support/redis-fence.mjs';

noUnhandledRejections(before, after);

const WORKER = fileURLToPath(new URL('./support/redis-permit-worker.mjs', import.meta.url));

let server;
const children = [];
before(async () => {
  server = await startRedisServer();
});
after(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await server?.stop();
});

describe('pipelines with limit across processes', () => {
  test('3 processes x 4 loops with { limit: 3 }, weights 1, 1 and 2: never more than 3 permits inside', async (t) => {
    const key = 'fleet-permits';
    const plan = [
      ['ioredis', 1],
      ['node-redis', 1],
      ['ioredis', 2],
    ];
    const workers = plan.map(([kind, weight]) => {
      const w = startFleetWorker(WORKER, ['fleet', kind, String(server.port), key, '3', String(weight), '4', '8'], kind);
      children.push(w.child);
      return w;
    });
    const ready = await within(FLEET_READY_MS, 'every worker connected', Promise.all(workers.map((w) => w.ready)));
    for (const r of ready) assert.equal(r.engine, engine, 'the workers run the same engine');
    for (const w of workers) w.go();
    const results = await within(FLEET_DONE_MS, 'the fleet finished', Promise.all(workers.map((w) => w.result)));
    const exits = await within(5000, 'the workers exited', Promise.all(workers.map((w) => w.exited)));
    assert.deepEqual(exits, workers.map(() => ({ code: 0, signal: null })), 'each worker exited by itself');
    for (const r of results) {
      assert.deepEqual(r.errors, [], `${r.kind} (weight ${r.weight}): no execution failed`);
      assert.equal(r.completed, 32, `${r.kind} (weight ${r.weight}): every execution ran`);
    }
    const most = Math.max(...results.map((r) => r.max));
    assert.ok(most <= 3, `at most 3 permits inside at once across the fleet, saw ${most}`);
    assert.ok(most >= 2, `permits are held together (at most ${most} inside at once)`);
    for (const r of results) assert.equal(r.violations, 0, `${r.kind} (weight ${r.weight}) never found more than 3 inside`);
    assert.equal(await call(server.port, ['GET', `permits-inside:${key}`]), '0');
    const tokens = results.flatMap((r) => r.tokens);
    assert.equal(new Set(tokens).size, tokens.length, 'every grant has a token of its own');
    t.diagnostic(`most permits inside at once: ${most}`);
  });

  test('readers in 2 processes and writers in a third: readers together, a writer alone', async () => {
    const key = 'fleet-modes';
    const plan = [
      ['ioredis', 'shared'],
      ['node-redis', 'shared'],
      ['ioredis', 'exclusive'],
    ];
    const workers = plan.map(([kind, mode]) => {
      const w = startFleetWorker(WORKER, ['fleet', kind, String(server.port), key, mode, '1', '3', '6'], `${kind} ${mode}`);
      children.push(w.child);
      return w;
    });
    await within(FLEET_READY_MS, 'every worker connected', Promise.all(workers.map((w) => w.ready)));
    for (const w of workers) w.go();
    const results = await within(FLEET_DONE_MS, 'the fleet finished', Promise.all(workers.map((w) => w.result)));
    for (const r of results) {
      assert.deepEqual(r.errors, [], `${r.kind} ${r.weight}: no execution failed`);
      assert.equal(r.completed, 18, `${r.kind} ${r.weight}: every execution ran`);
      assert.equal(r.violations, 0, `${r.kind} ${r.weight}: ${r.weight === 'shared' ? 'no writer inside beside a reader' : 'a writer alone'}`);
    }
    assert.equal(await call(server.port, ['GET', `permits-inside:${key}`]), '0');
    const tokens = results.flatMap((r) => r.tokens);
    assert.equal(new Set(tokens).size, tokens.length, 'every grant has a token of its own');
  });
});

/** Starts a holder process; resolves its token once it holds. */
async function startHolder(kind, key, limit, weight, ttl) {
  const child = spawn(process.execPath, [WORKER, 'hold', kind, String(server.port), key, String(limit), String(weight), String(ttl)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: process.env,
  });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const writes = [];
  const holding = new Promise((resolve, reject) => {
    onLines(child.stdout, (line) => {
      const message = JSON.parse(line);
      if (message.holding) resolve(message.token);
      else writes.push(message);
    });
    child.on('exit', (code, signal) => reject(new Error(`the holder exited (${code ?? signal}) before holding:\n${stderr}`)));
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal)));
  return { child, exited, writes, token: await within(FLEET_READY_MS, 'the holder holds its permits', holding) };
}

describe('a holder SIGKILLed', () => {
  for (const [holderKind, waiterKind] of [
    ['ioredis', 'node-redis'],
    ['node-redis', 'ioredis'],
  ]) {
    test(`its permits go to the next waiter, whose token refuses its late write (holder ${holderKind}, waiter ${waiterKind})`, async () => {
      const key = `killed-${holderKind}`;
      const resource = `fenced:${key}`;
      const ttl = 800;
      const holder = await startHolder(holderKind, key, 2, 2, ttl);
      const connect = waiterKind === 'ioredis' ? connectIoredis : connectNodeRedis;
      const client = await connect(server.port);
      const store = new RedisLockStore({ client, prefix: 'permits' });
      try {
        const write = (token) => fencedWrite(client, resource, token);
        const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: 5000, wait: 10_000, limit: 2, weight: 1 }).build();
        const running = pipeline.execute(async () => {
          const token = getLockToken();
          return { token, written: Number(await write(token)) };
        });
        // The waiter is queued in Redis behind the holder of both permits.
        const seen = await pollUntil('the waiter queued', async () => {
          const inspected = await store.inspect(key);
          return inspected?.waiters.length === 1 && inspected;
        }, { timeoutMs: 5000, intervalMs: 10 });
        assert.deepEqual(seen.holders.map((h) => [h.fencingToken, h.weight]), [[holder.token, 2]]);
        assert.equal(seen.limit, 2);
        holder.child.kill('SIGKILL');
        assert.equal(await holder.exited, 'SIGKILL');
        const killedAt = performance.now();
        const { token, written } = await within(10_000, 'the waiter ran after the holder was killed', running);
        assert.ok(token > holder.token, `the waiter's token ${token} is above the killed holder's ${holder.token}`);
        assert.equal(written, 1, "the waiter's fenced write is taken");
        assert.equal(await write(holder.token), 0, "the killed holder's late write is refused by the fence");
        // Only a bound that catches a hang: the permits came back with the lease's lapse.
        assert.ok(performance.now() - killedAt < 8000);
        assert.equal(await store.isLocked(key), false, 'the waiter released its permit');
      } finally {
        await store.close();
        (waiterKind === 'ioredis' ? closeIoredis : closeNodeRedis)(client);
      }
    });
  }
});

test('a holder paused past its ttl: the waiter gets its permits, and its write after it resumes is refused', async () => {
  const key = 'paused';
  const resource = `fenced:${key}`;
  const holder = await startHolder('ioredis', key, 3, 3, 600);
  const client = await connectNodeRedis(server.port);
  const store = new RedisLockStore({ client, prefix: 'permits' });
  try {
    const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, ttl: 5000, wait: 10_000, limit: 3, weight: 2 }).build();
    holder.child.kill('SIGSTOP');
    const { token, written } = await within(10_000, 'the waiter ran while the holder was paused', pipeline.execute(async () => {
      const token = getLockToken();
      return { token, written: await fencedWrite(client, resource, token) };
    }));
    assert.ok(token > holder.token);
    assert.equal(written, 1);
    holder.child.kill('SIGCONT');
    holder.child.stdin.write(`write ${resource}\n`);
    const late = await pollUntil("the resumed holder's write", () => holder.writes[0], { timeoutMs: 10_000, intervalMs: 10 });
    assert.equal(late.written, 0, "the fence refuses the resumed holder's write: its token is below the waiter's");
  } finally {
    holder.child.kill('SIGKILL');
    await store.close();
    closeNodeRedis(client);
  }
});
