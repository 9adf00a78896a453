// The Worker of js-tests/durable-object-permits.test.mjs, run by miniflare: permits on
// DurableObjectLockStore called directly (store level), one scenario per request, each
// on keys of its own; it reports what it saw and the test asserts it. `/run` and
// `/seen` drive pipelines with `limit` (engine level), one request per execution; the
// isolate's counters see who is inside (miniflare runs one isolate; the object is what
// coordinates).
import { ResiliencePipelineBuilder, acquireLock, getLockToken } from '../../lib/entries/workerd.mjs';
import { DurableObjectLockStore, LockDurableObject } from '../../lib/stores/durable-object/index.mjs';
import { SHARED_LIMIT } from '../../lib/stores/shared/store-support.mjs';

export { LockDurableObject };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const READ = { limit: SHARED_LIMIT, weight: 1 };
const WRITE = { limit: SHARED_LIMIT, weight: SHARED_LIMIT };

/** The grants `store` is handed on `key`, claimed as they come; `until(n)` waits for n (a hang fails). */
function grantsOf(store, key) {
  const got = [];
  let wake = () => {};
  store.subscribe(key, (grant) => {
    got.push(grant);
    wake();
    return true;
  });
  return {
    got,
    async until(n) {
      const deadline = Date.now() + 10_000;
      while (got.length < n) {
        if (Date.now() > deadline) throw new Error(`only ${got.length} of ${n} grants came on ${key}`);
        await Promise.race([new Promise((resolve) => (wake = resolve)), sleep(200)]);
      }
      return got;
    },
  };
}

/** The token of an answer, 'none' for undefined, or the answer itself ({ limit }). */
const shown = (answer) => (answer === undefined ? 'none' : (answer.fencingToken ?? answer));

async function refusal(promise) {
  try {
    await promise;
    return 'no error';
  } catch (error) {
    return `${error.name}: ${error.message}`;
  }
}

const scenarios = {
  /** Weights summed against the limit; a release makes room. */
  async weights(store, key) {
    const a = await store.acquire(key, 'a', 10_000, { limit: 5, weight: 2 });
    const b = await store.acquire(key, 'b', 10_000, { limit: 5, weight: 3 });
    const c = await store.acquire(key, 'c', 10_000, { limit: 5, weight: 1 });
    const seenFull = await store.inspect(key);
    const released = await store.release(key, 'a');
    const c2 = await store.acquire(key, 'c', 10_000, { limit: 5, weight: 1 });
    const d = await store.acquire(key, 'd', 10_000, { limit: 5, weight: 2 });
    const e = await store.acquire(key, 'e', 10_000, { limit: 5, weight: 1 });
    return { a: shown(a), b: shown(b), c: shown(c), released, c2: shown(c2), d: shown(d), e: shown(e), seenFull };
  },

  /** Readers together, a writer queued behind them, a reader queued behind the writer. */
  async modes(store, key, env) {
    const waiting = new DurableObjectLockStore({ namespace: env.LOCKS });
    const handed = grantsOf(waiting, key);
    const readers = [];
    for (const owner of ['r1', 'r2', 'r3']) readers.push(shown(await store.acquire(key, owner, 10_000, READ)));
    const writer = await waiting.acquire(key, 'w', 10_000, { ...WRITE, queue: true });
    const lateReader = await waiting.acquire(key, 'r4', 10_000, { ...READ, queue: true });
    const lateTry = await store.acquire(key, 'r5', 10_000, READ);
    const seenReading = await store.inspect(key);
    await store.release(key, 'r1');
    await store.release(key, 'r2');
    const beforeLast = handed.got.length;
    await store.release(key, 'r3');
    await handed.until(1);
    const seenWriting = await store.inspect(key);
    const readerWhileWriting = await store.acquire(key, 'r6', 10_000, READ);
    await waiting.release(key, 'w');
    await handed.until(2);
    const seenAfter = await store.inspect(key);
    await waiting.release(key, 'r4');
    return {
      readers,
      writer: shown(writer),
      lateReader: shown(lateReader),
      lateTry: shown(lateTry),
      beforeLast,
      grants: handed.got.map((g) => ({ owner: g.owner, fencingToken: g.fencingToken })),
      readerWhileWriting: shown(readerWhileWriting),
      seenReading,
      seenWriting,
      seenAfter,
    };
  },

  /** A heavy request at the head is not overtaken; permits go from the head while each fits. */
  async fifo(store, key, env) {
    const waiting = new DurableObjectLockStore({ namespace: env.LOCKS });
    const handed = grantsOf(waiting, key);
    const a = await store.acquire(key, 'a', 10_000, { limit: 3, weight: 1 });
    const heavy = await waiting.acquire(key, 'heavy', 10_000, { limit: 3, weight: 3, queue: true });
    const light1 = await waiting.acquire(key, 'light1', 10_000, { limit: 3, weight: 1, queue: true });
    const light2 = await waiting.acquire(key, 'light2', 10_000, { limit: 3, weight: 1, queue: true });
    const lightTry = await store.acquire(key, 'light3', 10_000, { limit: 3, weight: 1 });
    const queuedBefore = await store.queueLength(key);
    await store.release(key, 'a');
    await handed.until(1);
    const queuedWhileHeavy = await store.queueLength(key);
    await waiting.release(key, 'heavy');
    await handed.until(3); // both lights at once: they fit together
    const seen = await store.inspect(key);
    for (const owner of ['light1', 'light2']) await waiting.release(key, owner);
    return {
      a: shown(a),
      heavy: shown(heavy),
      light1: shown(light1),
      light2: shown(light2),
      lightTry: shown(lightTry),
      queuedBefore,
      queuedWhileHeavy,
      grants: handed.got.map((g) => ({ owner: g.owner, fencingToken: g.fencingToken })),
      seen,
    };
  },

  /** One limit per key while held or awaited: the other side is answered { limit }. */
  async agreement(store, key, env) {
    const plainKey = `${key}-plain`;
    const plain = await store.acquire(plainKey, 'p', 10_000);
    const permitsOnPlain = await store.acquire(plainKey, 'q', 10_000, { limit: 3, weight: 1 });
    const readOnPlain = await store.acquire(plainKey, 'q', 10_000, READ);
    const held = await store.acquire(key, 'a', 10_000, { limit: 3, weight: 1 });
    const plainOnPermits = await store.acquire(key, 'b', 10_000);
    const plainQueued = await store.acquire(key, 'b', 10_000, { queue: true });
    const otherLimit = await store.acquire(key, 'c', 10_000, { limit: 4, weight: 1, queue: true });
    const sameLimit = await store.acquire(key, 'd', 10_000, { limit: 3, weight: 2 });
    const queuedAfter = await store.queueLength(key);
    // Held full, a waiter of limit 3 queued: the limit stays while it waits.
    const waiting = new DurableObjectLockStore({ namespace: env.LOCKS });
    const handed = grantsOf(waiting, key);
    await waiting.acquire(key, 'e', 10_000, { limit: 3, weight: 3, queue: true });
    await store.release(key, 'a');
    await store.release(key, 'd');
    await handed.until(1);
    const whileHanded = await store.acquire(key, 'f', 10_000, { limit: 4, weight: 1 });
    await waiting.release(key, 'e');
    await store.release(plainKey, 'p');
    const afterwards = await store.acquire(key, 'g', 10_000, { limit: 4, weight: 4 });
    const plainAfterwards = await store.acquire(plainKey, 'h', 10_000, { limit: 2, weight: 1 });
    await store.release(key, 'g');
    await store.release(plainKey, 'h');
    return {
      plain: shown(plain),
      permitsOnPlain: shown(permitsOnPlain),
      readOnPlain: shown(readOnPlain),
      held: shown(held),
      plainOnPermits: shown(plainOnPermits),
      plainQueued: shown(plainQueued),
      otherLimit: shown(otherLimit),
      sameLimit: shown(sameLimit),
      queuedAfter,
      whileHanded: shown(whileHanded),
      afterwards: shown(afterwards),
      plainAfterwards: shown(plainAfterwards),
    };
  },

  /** renew and release act on one owner's permit; a queued owner's release takes it out of the queue. */
  async perOwner(store, key) {
    const opts = { limit: 2, weight: 1 };
    await store.acquire(key, 'a', 10_000, opts);
    await store.acquire(key, 'b', 10_000, opts);
    const queued = await store.acquire(key, 'c', 10_000, { ...opts, queue: true });
    const queuedBefore = await store.queueLength(key);
    const releasedQueued = await store.release(key, 'c');
    const queuedAfter = await store.queueLength(key);
    const renewA = await store.renew(key, 'a', 20_000);
    const seen = await store.inspect(key);
    const releaseA = await store.release(key, 'a');
    const renewAAgain = await store.renew(key, 'a', 10_000);
    const releaseAAgain = await store.release(key, 'a');
    const renewB = await store.renew(key, 'b', 10_000);
    const renewStranger = await store.renew(key, 'z', 10_000);
    const again = await store.acquire(key, 'b', 10_000, opts);
    const releaseB = await store.release(key, 'b');
    return { queued: shown(queued), queuedBefore, releasedQueued, queuedAfter, renewA, seen, releaseA, renewAAgain, releaseAAgain, renewB, renewStranger, again: shown(again), releaseB, locked: await store.isLocked(key) };
  },

  /** A holder that lets its permits lapse: they pass to the queue's head; the others keep theirs. */
  async lapse(store, key, env) {
    const waiting = new DurableObjectLockStore({ namespace: env.LOCKS });
    const handed = grantsOf(waiting, key);
    const short = await store.acquire(key, 'short', 300, { limit: 3, weight: 2 });
    const long = await store.acquire(key, 'long', 10_000, { limit: 3, weight: 1 });
    const startedAt = Date.now();
    const next = await waiting.acquire(key, 'next', 10_000, { limit: 3, weight: 2, queue: true });
    await handed.until(1);
    const waited = Date.now() - startedAt;
    const renewShort = await store.renew(key, 'short', 10_000);
    const renewLong = await store.renew(key, 'long', 10_000);
    const seen = await store.inspect(key);
    await store.release(key, 'long');
    await waiting.release(key, 'next');
    return { short: shown(short), long: shown(long), next: shown(next), granted: handed.got[0], waited, renewShort, renewLong, seen };
  },

  /** An object whose storage an earlier release wrote (one `lease`, owner 'old'): it keeps that lease. */
  async upgraded(store, key) {
    const seen = await store.inspect(key);
    const other = await store.acquire(key, 'new', 10_000);
    const renewed = await store.renew(key, 'old', 10_000);
    const released = await store.release(key, 'old');
    const next = await store.acquire(key, 'new', 10_000);
    await store.release(key, 'new');
    return { seen, other: shown(other), renewed, released, next: shown(next) };
  },

  /** Bad options are refused, by the store and by the object. */
  async refusals(store, key, env) {
    const stub = env.LOCKS.get(env.LOCKS.idFromName(`leasehold:${key}`));
    return {
      permits: store.permits,
      zeroLimit: await refusal(store.acquire(key, 'a', 1000, { limit: 0, weight: 1 })),
      noWeight: await refusal(store.acquire(key, 'a', 1000, { limit: 3 })),
      tooHeavy: await refusal(store.acquire(key, 'a', 1000, { limit: 3, weight: 4 })),
      fraction: await refusal(store.acquire(key, 'a', 1000, { limit: 2.5, weight: 1 })),
      overShared: await refusal(store.acquire(key, 'a', 1000, { limit: SHARED_LIMIT + 1, weight: 1 })),
      badQueue: await refusal(store.acquire(key, 'a', 1000, { queue: 'yes' })),
      objectTooHeavy: await refusal(stub.acquire('a', 1000, { limit: 2, weight: 3 })),
      // What a store of an earlier release sends: `queue` alone, as a boolean.
      objectEarlierStore: await stub.acquire('old', 1000, false).then((answer) => stub.release('old').then(() => answer)),
      untouched: (await store.inspect(key)) ?? null,
    };
  },
};

/** Per key: the weight inside now, the most seen, each execution's grant, and enters and leaves in order. */
const seen = new Map();

/** One pipeline execution with the request's `limit`, `weight` and `mode`, holding `hold` ms. */
async function run(store, params) {
  const key = params.get('key');
  const number = (name) => (params.has(name) ? Number(params.get(name)) : undefined);
  const weight = number('weight') ?? 1;
  const lock = { key, store, ttl: params.get('ttl') ?? '10s', wait: params.get('wait') ?? '20s', limit: number('limit') };
  if (params.has('weight')) lock.weight = weight;
  const pipeline = new ResiliencePipelineBuilder().addLock(lock).build();
  if (!seen.has(key)) seen.set(key, { inside: 0, most: 0, grants: [], log: [] });
  const state = seen.get(key);
  try {
    return await pipeline.execute(async (context) => {
      const token = getLockToken(context);
      state.inside += weight;
      state.most = Math.max(state.most, state.inside);
      state.grants.push({ name: params.get('name'), token });
      state.log.push({ event: 'enter', token });
      await sleep(Number(params.get('hold') ?? 0));
      state.inside -= weight;
      state.log.push({ event: 'leave', token });
      return { token };
    });
  } catch (error) {
    return { error: error.code ?? String(error), heldWith: error.heldWith };
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/run') return Response.json(await run(new DurableObjectLockStore({ namespace: env.LOCKS }), url.searchParams));
    if (url.pathname === '/seen') return Response.json(seen.get(url.searchParams.get('key')) ?? null);
    if (url.pathname === '/abandon') {
      // Permits taken and never released: the request ends while they are live.
      const store = new DurableObjectLockStore({ namespace: env.LOCKS });
      const p = url.searchParams;
      const lease = await acquireLock(store, p.get('key'), Number(p.get('ttl')), { limit: Number(p.get('limit')), weight: Number(p.get('weight')) });
      return Response.json({ token: lease.fencingToken, owner: lease.owner });
    }
    const scenario = scenarios[url.pathname.slice(1)];
    if (scenario === undefined) return new Response('not found', { status: 404 });
    const store = new DurableObjectLockStore({ namespace: env.LOCKS });
    try {
      return Response.json(await scenario(store, url.searchParams.get('key'), env));
    } catch (error) {
      return Response.json({ error: `${error.name}: ${error.message}` });
    }
  },
};
