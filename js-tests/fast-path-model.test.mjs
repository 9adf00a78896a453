// The memory fast path against a model: random interleavings of every way to take a
// memory-store key (fast pipelines, operationKey and key functions, telemetry, several
// locks with a JS store outside, withLock, manual leases, direct store calls, aborts,
// fake time, waiting with and without a deadline; two of the keys share a bucket) must keep at most one holder per key, give
// each holder a larger fencing token than the key's last, and leave nothing behind: no
// lease, no execution, no busy bucket. A failure names its seed; LEASEHOLD_MODEL_SEEDS
// runs more of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import leasehold from 'leasehold';
import {
  engine,
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  getLockToken,
  acquireLock,
  withLock,
} from './support/leasehold.mjs';
import { flush, deferred } from './support/time.mjs';

const require = createRequire(import.meta.url);
const { BUSY_FIRST, BUCKETS, bucketOf } = require('../lib/host/fast-path.cjs');
const { STORE_ID } = require('../lib/host/symbols.cjs');
const internals = leasehold[Symbol.for('leasehold.internals')];

const SEEDS = Number(process.env.LEASEHOLD_MODEL_SEEDS ?? 150);
const STEPS = 300;

/** A small seeded generator (mulberry32): the same seed, the same run. */
function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A JS store whose answers come from a microtask: a lock outside a memory lock waits on it. */
function asyncStore() {
  const leases = new Map();
  let token = 0;
  return {
    async acquire(key, owner) {
      await null;
      if (leases.has(key) && leases.get(key) !== owner) return undefined;
      leases.set(key, owner);
      return { fencingToken: ++token };
    },
    async renew(key, owner) {
      await null;
      return leases.get(key) === owner;
    },
    async release(key, owner) {
      await null;
      if (leases.get(key) !== owner) return false;
      leases.delete(key);
      return true;
    },
  };
}

/** One seed's run; returns what broke. */
async function run(seed) {
  const rand = random(seed);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const clock = new FakeTimeProvider();
  const store = new MemoryLockStore({ timeProvider: clock });
  const jsStore = asyncStore();
  // 'c' shares a bucket of busy words with 'a': the engine's record of one sends the other the slow way.
  let c = 0;
  while (bucketOf(store[STORE_ID], `c${c}`) !== bucketOf(store[STORE_ID], 'a')) c++;
  const KEYS = ['a', 'b', `c${c}`];
  const broken = [];
  const holders = new Map();
  const lastToken = new Map();
  const releases = [];
  // Every execution and call started, and how many of them have not settled yet.
  let open = 0;
  const settled = [];
  const track = (promise) => {
    open++;
    settled.push(promise.finally(() => open--));
  };
  let next = 0;

  const enter = (key, who, token) => {
    if (holders.get(key)) broken.push(`seed ${seed}: ${who} took '${key}' while ${holders.get(key)} held it`);
    if (token !== undefined) {
      if (!(token > (lastToken.get(key) ?? 0))) broken.push(`seed ${seed}: ${who} got token ${token} on '${key}' after ${lastToken.get(key)}`);
      lastToken.set(key, token);
    }
    holders.set(key, who);
  };
  const leave = (key, who) => {
    if (holders.get(key) === who) holders.delete(key);
  };
  /** A callback holding `key` until the run lets it go. */
  const hold = (key, who, token, also = () => {}) => {
    enter(key, who, token);
    const done = deferred();
    releases.push(() => {
      leave(key, who);
      also();
      done.resolve();
    });
    return done.promise;
  };

  const build = (lock, options) => new ResiliencePipelineBuilder({ timeProvider: clock, ...options }).addLock(lock).build();
  // Waiting without a deadline, an execution queues behind a fast holder (the host's queue).
  const fixed = Object.fromEntries(
    KEYS.map((k) => [k, [build({ key: k, store }), build({ key: k, store, wait: 50_000 }), build({ key: k, store, wait: Infinity })]]),
  );
  const byOperation = build({ store, wait: rand() < 0.5 ? 50_000 : Infinity });
  // Telemetry runs while the engine applies its effects: a direct call there hands a fast hold over.
  const withTelemetry = build({ store, wait: 50_000 }, { telemetry: () => rand() < 0.5 && store.isLocked(pick(KEYS)) });
  // A key function runs between execute() and the grant: it may start another execution on the key.
  const byFunction = build({
    store,
    wait: 50_000,
    key: (ctx) => {
      const key = ctx.operationKey;
      if (rand() < 0.5) {
        const who = `#${next++}`;
        track(pick(fixed[key]).execute((c) => hold(key, who, getLockToken(c))).catch(() => {}));
      }
      return key;
    },
  });

  for (let step = 0; step < STEPS; step++) {
    const r = rand();
    const key = pick(KEYS);
    const who = `#${next++}`;
    let signal;
    if (rand() < 0.15) {
      const controller = new AbortController();
      signal = controller.signal;
      if (rand() < 0.5) queueMicrotask(() => controller.abort(new Error('aborted')));
      else setImmediate(() => controller.abort(new Error('aborted')));
    }
    const options = { signal, operationKey: key };
    const body = (ctx) => hold(key, who, getLockToken(ctx));
    let started;
    if (r < 0.25) started = pick(fixed[key]).execute(body, { signal });
    else if (r < 0.35) started = byOperation.execute(body, options);
    else if (r < 0.45) started = byFunction.execute(body, options);
    else if (r < 0.5) started = withTelemetry.execute(body, options);
    else if (r < 0.58) {
      // Two locks: a memory key outside another (the inner one is taken once the outer is).
      const inner = pick(KEYS.filter((k) => k !== key));
      const outside = rand() < 0.5 ? { key, store, wait: 50_000 } : { key: `js-${key}`, store: jsStore, wait: 50_000 };
      const nested = new ResiliencePipelineBuilder({ timeProvider: clock })
        .addLock(outside)
        .addLock({ key: inner, store, wait: 50_000 })
        .build();
      started = nested.execute((ctx) => {
        if (outside.store === store) enter(key, who, undefined);
        return hold(inner, who, getLockToken(ctx), () => leave(key, who));
      }, { signal });
    } else if (r < 0.64) started = withLock(key, body, { store, timeProvider: clock, wait: 50_000 });
    else if (r < 0.7) {
      const wait = rand() < 0.5 ? 0 : 50_000;
      started = acquireLock(store, key, 30_000, { timeProvider: clock, wait, autoRenew: true }).then(
        (lease) => lease && hold(key, who, lease.fencingToken, () => lease.release()),
      );
    } else if (r < 0.75) {
      // A direct lease that outlives the run: only its release frees the key.
      started = store.acquire(key, who, 1e9).then((got) => got && hold(key, who, got.fencingToken, () => store.release(key, who)));
    } else if (r < 0.8) started = store.isLocked(key);
    else if (r < 0.83) started = store.ttl(key);
    else if (r < 0.88) clock.advance(Math.floor(rand() * 20_000));
    else if (r < 0.96) {
      for (let i = Math.floor(rand() * 3); i >= 0 && releases.length > 0; i--) releases.splice(Math.floor(rand() * releases.length), 1)[0]();
    } else await flush(1);
    if (started) track(started.catch(() => {}));
    if (rand() < 0.3) await null;
    if (rand() < 0.1) await flush(1);
  }
  // Let every holder go and every waiter through (one waiting without a deadline runs,
  // and is let go, once those before it have gone).
  for (let round = 0; round < 200 && (releases.length > 0 || round < 3 || open > 0); round++) {
    while (releases.length > 0) releases.shift()();
    await flush(1);
    clock.advance(60_000);
    await flush(1);
  }
  await Promise.all(settled);
  const host = internals.hostOf(clock);
  if (store.size !== 0) broken.push(`seed ${seed}: ${store.size} keys left in the store`);
  if (host.execs.size !== 0) broken.push(`seed ${seed}: ${host.execs.size} executions left`);
  const words = host.fast.wordsNow();
  const busy = words.slice(BUSY_FIRST, BUSY_FIRST + BUCKETS).filter((count) => count !== 0).length;
  if (busy !== 0) broken.push(`seed ${seed}: ${busy} buckets left busy`);
  return broken;
}

test(`random interleavings keep one holder per memory key, rising tokens, nothing left (${engine})`, async () => {
  const broken = [];
  for (let seed = 1; seed <= SEEDS; seed++) broken.push(...(await run(seed)));
  assert.deepEqual(broken, []);
});
