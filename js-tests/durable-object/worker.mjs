// The Worker of js-tests/durable-object-store.test.mjs, run by miniflare: requests lock
// keys through DurableObjectLockStore, and report what they saw. Isolate-wide counters
// find overlaps (miniflare runs one isolate; the Durable Object is what coordinates).
import { ResiliencePipelineBuilder, getLockToken, acquireLock, withLock, MemoryLockStore, FakeTimeProvider } from '../../lib/entries/workerd.mjs';
import { DurableObjectLockStore, LockDurableObject } from '../../lib/stores/durable-object/index.mjs';

export { LockDurableObject };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const holders = new Map(); // key -> holders now
const seen = { overlaps: 0, grants: [] };

async function run(store, params) {
  const key = params.get('key');
  const pipeline = new ResiliencePipelineBuilder()
    .addLock({ key, store, ttl: params.get('ttl') ?? '10s', wait: params.get('wait') ?? 0 })
    .build();
  try {
    const token = await pipeline.execute(async (context) => {
      const token = getLockToken(context);
      holders.set(key, (holders.get(key) ?? 0) + 1);
      if (holders.get(key) > 1) seen.overlaps += 1;
      seen.grants.push({ key, token, name: params.get('name') });
      await sleep(Number(params.get('hold') ?? 0));
      holders.set(key, holders.get(key) - 1);
      return token;
    });
    return { token, endedAt: Date.now() };
  } catch (error) {
    return { error: error.code ?? String(error) };
  }
}

function attempt(fn) {
  try {
    fn();
    return 'no error';
  } catch (error) {
    return `${error.name}: ${error.message}`;
  }
}

/** Polls `store`'s queue of `key` until it has `n` owners (at most ~5 s); its last length. */
async function queueReaches(store, key, n) {
  let queued;
  for (let i = 0; i < 500 && (queued = await store.queueLength(key)) !== n; i++) await sleep(10);
  return queued;
}

/**
 * A lease held with two waiters, each through its own store: what `inspect` shows then,
 * and while each waiter holds the key in turn; a missing key; and `list` refused.
 */
async function inspection(env, key) {
  const stores = [0, 1, 2].map(() => new DurableObjectLockStore({ namespace: env.LOCKS }));
  const lease = await acquireLock(stores[0], key, 10_000);
  const during = [];
  const runs = [];
  for (const i of [1, 2]) {
    runs.push(withLock({ key, store: stores[i], ttl: 10_000, wait: '20s' }, async () => {
      during.push(await stores[0].inspect(key));
    }));
    await queueReaches(stores[0], key, i);
  }
  const shown = await stores[0].inspect(key);
  await lease.release();
  await Promise.all(runs);
  return {
    lease: { owner: lease.owner, fencingToken: lease.fencingToken },
    shown,
    during,
    missing: (await stores[0].inspect(`${key}-missing`)) ?? null,
    afterwards: (await stores[0].inspect(key)) ?? null,
    list: attempt(() => stores[0].list()),
    now: Date.now(),
  };
}

/**
 * W1 and W2 wait through one store (one engine queue) behind a holder of another store;
 * W1 is aborted while W2 still waits. Reports the queue's length at each step.
 */
async function siblingAbort(env, key) {
  const holderStore = new DurableObjectLockStore({ namespace: env.LOCKS });
  const store = new DurableObjectLockStore({ namespace: env.LOCKS });
  const h = await acquireLock(holderStore, key, 10_000);
  const controller = new AbortController();
  const w1 = acquireLock(store, key, 10_000, { wait: '20s', signal: controller.signal }).then(
    () => 'acquired',
    (error) => error.name,
  );
  const bothQueued = await queueReaches(store, key, 1).then(() => {
    const w2 = acquireLock(store, key, 10_000, { wait: '20s' });
    return queueReaches(store, key, 2).then((n) => ({ n, w2 }));
  });
  controller.abort();
  const w1Outcome = await w1;
  const afterAbort = await queueReaches(store, key, 1);
  await h.release();
  const lease = await bothQueued.w2;
  const afterGrant = await store.queueLength(key);
  await lease.release();
  return { bothQueued: bothQueued.n, w1Outcome, afterAbort, afterGrant, newer: lease.fencingToken > h.fencingToken };
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const params = url.searchParams;
    const store = new DurableObjectLockStore({ namespace: env.LOCKS });
    switch (url.pathname) {
      case '/run':
        return Response.json(await run(store, params));
      case '/seen':
        return Response.json(seen);
      case '/lease': {
        // A lease taken and never released: the request ends while it is live.
        const lease = await acquireLock(store, params.get('key'), Number(params.get('ttl')));
        return Response.json({ token: lease?.fencingToken, owner: lease?.owner });
      }
      case '/renew':
        return Response.json({ renewed: await store.renew(params.get('key'), params.get('owner'), 1000) });
      case '/sibling-abort':
        return Response.json(await siblingAbort(env, params.get('key')));
      case '/inspect':
        return Response.json(await inspection(env, params.get('key')));
      case '/queued':
        return Response.json({ queued: await store.queueLength(params.get('key')) });
      case '/locked':
        return Response.json({ locked: await store.isLocked(params.get('key')), ttl: (await store.ttl(params.get('key'))) ?? null });
      case '/refusals':
        return Response.json({
          memoryWait: attempt(() => new ResiliencePipelineBuilder().addLock({ key: 'm', wait: '1s' })),
          explicitMemoryWait: attempt(() => new ResiliencePipelineBuilder().addLock({ key: 'm', wait: 5, store: new MemoryLockStore() })),
          memoryFailFast: attempt(() => new ResiliencePipelineBuilder().addLock({ key: 'm', wait: '0ms' })),
          fakeClockWait: attempt(() => new ResiliencePipelineBuilder({ timeProvider: new FakeTimeProvider() }).addLock({ key: 'm', wait: '1s' })),
          withLockWait: await Promise.resolve()
            .then(() => withLock({ key: 'm', wait: '1s' }, () => 'ran'))
            .then((v) => `no error: ${v}`, (e) => `${e.name}: ${e.message}`),
          withLockDefault: await withLock('m', () => 'ran').then((v) => v, (e) => `${e.name}: ${e.message}`),
          acquireLockWait: await acquireLock(new MemoryLockStore(), 'm', 1000, { wait: 10 }).then(() => 'no error', (e) => `${e.name}: ${e.message}`),
          badNamespace: attempt(() => new DurableObjectLockStore({ namespace: {} })),
          badOption: attempt(() => new DurableObjectLockStore({ namespace: env.LOCKS, prefx: 'x' })),
        });
      default:
        return new Response('not found', { status: 404 });
    }
  },
};
