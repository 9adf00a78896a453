// The engine over a custom JS store that grants on release (README, "custom stores":
// `subscribe` and `grantsOnRelease`), on FakeTimeProvider: the in-memory granting store
// of support/stores.mjs, each scenario with grants offered inside the release, in a
// microtask and in a later turn, with and without their `age`. Every scenario checks
// that each execution settles once, that no two callbacks ever hold the key together
// (and each runs under the store's live lease), that nothing is left in the engine or
// the host, and that the key is free at the end. Runs once per engine.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import api, { ResiliencePipelineBuilder, FakeTimeProvider, LockStoreError, getLockToken } from 'leasehold';
import { advance, deferred, flush } from './support/time.mjs';
import { grantingStore } from './support/stores.mjs';
import { noUnhandledRejections } from './support/async.mjs';

const { hostOf } = api[Symbol.for('leasehold.internals')];

noUnhandledRejections(before, after);

const KEY = 'k';
const TTL = 3000;

/**
 * One scenario's world: `clocks` (one engine each), a granting store on the first, and
 * `start(name, options)` to start an execution on `KEY` that records when its callback
 * runs, checks exclusion against the store, and counts its settlements.
 */
function world(storeOptions, clockCount = 1) {
  const clocks = Array.from({ length: clockCount }, () => new FakeTimeProvider());
  const clock = clocks[0];
  const store = grantingStore(clock, storeOptions);
  const w = { clocks, clock, store, ran: [], holders: 0, maxHolders: 0, overlaps: [], execs: new Map() };
  w.pipeline = (lock = {}, clockIndex = 0) =>
    new ResiliencePipelineBuilder({ timeProvider: clocks[clockIndex] })
      .addLock({ key: KEY, store, ttl: TTL, wait: 10_000, ...lock })
      .build();
  const defaultPipeline = w.pipeline();
  /** `body(ctx)` is what the callback does while it holds the key. */
  w.start = (name, { pipeline = defaultPipeline, signal, body } = {}) => {
    const rec = { name, settled: 0, outcome: undefined };
    w.execs.set(name, rec);
    const promise = pipeline.execute(
      async (ctx) => {
        w.holders += 1;
        w.maxHolders = Math.max(w.maxHolders, w.holders);
        w.ran.push(name);
        const lease = store.leases.get(KEY);
        if (!lease || lease.token !== getLockToken(ctx) || lease.expires <= clock.now()) {
          w.overlaps.push(`${name} runs under token ${getLockToken(ctx)}, the store's lease is ${JSON.stringify(lease)}`);
        }
        try {
          return await (body ? body(ctx) : name);
        } finally {
          w.holders -= 1;
        }
      },
      { signal },
    );
    promise.then(
      (value) => ((rec.settled += 1), (rec.outcome = { value })),
      (error) => ((rec.settled += 1), (rec.outcome = { error })),
    );
    return rec;
  };
  /** Lets promises settle, and grants delivered in a later turn arrive. */
  w.settle = async (rounds = 12) => {
    await flush(rounds);
  };
  /** Advances every clock by `ms` in steps of `step`. */
  w.advance = async (ms, step = 10) => {
    for (let t = 0; t < ms; t += step) {
      for (const c of clocks) c.advance(step);
      await flush(4);
    }
  };
  /** The checks every scenario ends with. */
  w.check = async (label) => {
    await w.settle();
    for (const rec of w.execs.values()) assert.equal(rec.settled, 1, `${label}: ${rec.name} settled once`);
    assert.deepEqual(w.overlaps, [], `${label}: each callback ran under the store's live lease`);
    assert.equal(w.maxHolders <= 1, true, `${label}: never two holders`);
    for (const c of clocks) {
      const host = hostOf(c);
      assert.equal(host.execs.size, 0, `${label}: host records`);
      assert.equal(host.engine.liveExecutions(), 0, `${label}: engine executions`);
      assert.equal(host.engine.openRequests(), 0, `${label}: open requests`);
    }
    assert.equal(await store.isLocked(KEY), false, `${label}: the key is free`);
    assert.equal(store.unanswered.size, 0, `${label}: no try left unanswered`);
  };
  return w;
}

/** Holds KEY until `release()`; its record is `rec`. */
function holder(w, name = 'H', options = {}) {
  const done = deferred();
  const rec = w.start(name, { ...options, body: () => done.promise.then(() => name) });
  return { rec, release: () => done.resolve() };
}

const VARIANTS = [];
for (const deliver of ['sync', 'microtask', 'macrotask'])
  for (const age of [true, false]) VARIANTS.push({ deliver, age, label: `${deliver}${age ? '' : ', no age'}` });

const value = (w, name) => w.execs.get(name).outcome?.value;
const error = (w, name) => w.execs.get(name).outcome?.error;

/**
 * The scenarios, each `run(w)` with its own assertions; `w.check` runs after each.
 * `store` gives the store's options beyond the variant's, `clocks` how many engines.
 */
const SCENARIOS = [
  {
    name: 'waiters are handed the lease in arrival order, without a poll',
    async run(w) {
      const h = holder(w);
      await w.settle();
      for (let i = 1; i <= 4; i++) {
        w.start(`W${i}`);
        await w.settle();
      }
      h.release();
      await w.settle(30);
      assert.deepEqual(w.ran, ['H', 'W1', 'W2', 'W3', 'W4']);
      assert.ok(w.store.times('acquire').every((at) => at === 0), 'no poll: the clock never moved');
      assert.deepEqual(w.store.grants.map((g) => g.outcome), ['claimed', 'claimed', 'claimed', 'claimed']);
      const tokens = w.store.grants.map((g) => g.token);
      assert.deepEqual(tokens, [...tokens].sort((a, b) => a - b), 'tokens increase');
    },
  },
  ...[
    {
      // The engine releases the aborted owner while W2 still waits: the store takes it
      // out of its queue, and the holder's release hands the key straight to W2.
      how: 'aborted',
      start: (w, controller) => w.start('W1', { signal: controller.signal }),
      giveUp: async (w, controller) => {
        controller.abort('gone');
        await w.settle();
        assert.equal(error(w, 'W1'), 'gone');
      },
      grants: ['claimed'],
    },
    {
      how: 'aborted, on a store whose release leaves a queued owner queued,',
      store: { dequeueOnRelease: false },
      start: (w, controller) => w.start('W1', { signal: controller.signal }),
      giveUp: async (w, controller) => {
        controller.abort('gone');
        await w.settle();
        assert.equal(error(w, 'W1'), 'gone');
      },
    },
    {
      how: 'that times out',
      start: (w) => w.start('W1', { pipeline: w.pipeline({ wait: 100 }) }),
      giveUp: async (w) => {
        await w.advance(100);
        assert.equal(error(w, 'W1')?.code, 'LOCK_NOT_ACQUIRED');
      },
    },
  ].map(({ how, start, giveUp, store, grants = ['released', 'claimed'] }) => ({
    name:
      grants.length === 1
        ? `a waiter ${how} while queued: it leaves the store's queue, the next waiter is handed the key`
        : `a waiter ${how} while queued: its grant is released and passes on`,
    store,
    async run(w) {
      const h = holder(w);
      await w.settle();
      const controller = new AbortController();
      start(w, controller);
      await w.settle();
      w.start('W2');
      await w.settle();
      await giveUp(w, controller);
      h.release();
      await w.settle(30);
      assert.deepEqual(w.ran, ['H', 'W2']);
      assert.deepEqual(w.store.grants.map((g) => g.outcome), grants);
    },
  })),
  {
    name: "a grant before its owner's first answer, nobody listening: the try answers with it",
    async run(w) {
      const h = holder(w);
      await w.settle();
      const answer = w.hold('acquire');
      w.start('W');
      await w.settle();
      h.release();
      await w.settle();
      assert.deepEqual(w.store.grants.map((g) => g.outcome), ['kept']);
      answer.resolve();
      await w.settle();
      assert.deepEqual(w.ran, ['H', 'W']);
      assert.equal(w.store.times('release').length, 2, 'H and W released, nothing else');
    },
  },
  {
    name: "a grant before its owner's first answer, the engine listening for another waiter: claimed at once",
    async run(w) {
      const h = holder(w);
      await w.settle();
      const answer = w.hold('acquire');
      const w1 = holder(w, 'W');
      await w.settle();
      w.start('V');
      await w.settle();
      h.release();
      await w.settle();
      assert.deepEqual(w.ran, ['H', 'W'], 'W, queued first in the store, runs before its answer');
      answer.resolve();
      await w.settle();
      assert.deepEqual(w.ran, ['H', 'W'], "W's late answer changes nothing");
      w1.release();
      await w.settle(30);
      assert.deepEqual(w.ran, ['H', 'W', 'V']);
      assert.deepEqual(w.store.grants.map((g) => g.outcome), ['claimed', 'claimed']);
    },
  },
  {
    name: 'a grant kept for a try that then fails is released and passes on (the next waiter on another engine)',
    clocks: 2,
    async run(w) {
      const h = holder(w);
      await w.settle();
      const answer = w.hold('acquire');
      w.start('W');
      await w.settle();
      // V waits through another engine: that engine listens, and leaves W's grant alone.
      w.start('V', { pipeline: w.pipeline({}, 1) });
      await w.settle();
      h.release();
      await w.settle();
      assert.deepEqual(w.store.grants.map((g) => g.outcome), ['kept']);
      answer.reject(new Error('the answer was lost'));
      await w.settle(30);
      const e = error(w, 'W');
      assert.ok(e instanceof LockStoreError, String(e));
      assert.equal(e.method, 'acquire');
      assert.equal(e.cause?.message, 'the answer was lost');
      assert.deepEqual(w.ran, ['H', 'V']);
    },
  },
  {
    name: 'aborted while its try is in flight, granted before the answer: the late grant is released and passes on',
    // A store that keeps the aborted owner queued (one that does, drops it at the
    // engine's release of that owner, and grants it nothing): its grant comes.
    store: { dequeueOnRelease: false },
    async run(w) {
      const h = holder(w);
      await w.settle();
      const w0 = holder(w, 'W0'); // queued in the engine: it listens on the key
      await w.settle();
      const controller = new AbortController();
      const answer = w.hold('acquire');
      w.start('W', { signal: controller.signal });
      await w.settle();
      controller.abort('gone');
      await w.settle();
      assert.equal(error(w, 'W'), 'gone');
      h.release(); // to W0, which holds until released
      await w.settle();
      assert.deepEqual(w.ran, ['H', 'W0']);
      w0.release(); // to W, which gave up: kept for its try in flight
      await w.settle();
      answer.resolve();
      await w.settle(30);
      assert.deepEqual(w.ran, ['H', 'W0']);
      assert.deepEqual(w.store.grants.map((g) => g.outcome), ['claimed', 'kept']);
    },
  },
  {
    name: 'the caller aborts right as the grant arrives (a listener ahead of the engine aborts it)',
    async run(w) {
      const h = holder(w);
      await w.settle();
      const controller = new AbortController();
      w.start('W1', { signal: controller.signal });
      await w.settle();
      w.start('W2');
      await w.settle();
      const stop = w.store.subscribe(KEY, (grant) => {
        if (grant && w.execs.get('W1').settled === 0) controller.abort('at the grant');
        return false;
      });
      // Ahead of the engine's listener: re-add the engine's after it.
      const set = w.store.listeners.get(KEY);
      const entries = [...set];
      set.clear();
      for (const entry of [entries.at(-1), ...entries.slice(0, -1)]) set.add(entry);
      h.release();
      await w.settle(30);
      stop();
      assert.equal(error(w, 'W1'), 'at the grant');
      assert.deepEqual(w.ran, ['H', 'W2']);
    },
  },
  {
    name: 'the caller aborts in the same turn as the grant, after it',
    async run(w) {
      const h = holder(w);
      await w.settle();
      const controller = new AbortController();
      const untilAborted = ({ signal }) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      w.start('W1', { signal: controller.signal, body: untilAborted });
      await w.settle();
      w.start('W2');
      await w.settle();
      h.release();
      queueMicrotask(() => controller.abort('right after'));
      await w.settle(30);
      // Whether W1 ran (its signal then aborts) or not, it rejects with the reason.
      assert.equal(error(w, 'W1'), 'right after');
      assert.deepEqual(w.ran.filter((n) => n !== 'W1'), ['H', 'W2']);
    },
  },
  {
    name: 'a listener that throws does not keep the grant from the engine',
    async run(w) {
      const stop = w.store.subscribe(KEY, () => {
        throw new Error('listener');
      });
      const h = holder(w);
      await w.settle();
      w.start('W1');
      await w.settle();
      w.start('W2', {
        body: () => {
          throw new Error('callback');
        },
      });
      await w.settle();
      h.release();
      await w.settle(30);
      stop();
      assert.deepEqual(w.ran, ['H', 'W1', 'W2']);
      assert.equal(error(w, 'W2')?.message, 'callback');
    },
  },
  {
    name: 'subscribe throws: nobody claims, grants are released, waiters poll and run in turn',
    store: {
      subscribe() {
        throw new Error('no subscriptions');
      },
    },
    async run(w) {
      const h = holder(w);
      await w.settle();
      w.start('W1');
      await w.settle();
      w.start('W2');
      await w.settle();
      h.release();
      await w.settle();
      await w.advance(2000);
      assert.deepEqual(w.ran, ['H', 'W1', 'W2']);
      assert.ok(w.store.grants.every((g) => g.outcome === 'released'), JSON.stringify(w.store.grants));
    },
  },
  {
    name: 'unsubscribe removes nothing: stale listeners stay, later rounds still hand over',
    store: { unsubscribe() {} },
    async run(w) {
      for (let round = 0; round < 3; round++) {
        const h = holder(w, `H${round}`);
        await w.settle();
        w.start(`W${round}a`);
        await w.settle();
        w.start(`W${round}b`);
        await w.settle();
        h.release();
        await w.settle(30);
      }
      assert.deepEqual(w.ran, ['H0', 'W0a', 'W0b', 'H1', 'W1a', 'W1b', 'H2', 'W2a', 'W2b']);
      assert.ok(w.store.listeners.get(KEY).size >= 3, 'the stale listeners are still there');
      assert.ok(w.store.grants.every((g) => g.outcome === 'claimed'));
    },
  },
  {
    name: 'a handed-over lease is renewed from when it was granted: held for 3 ttl, under the live lease throughout',
    async run(w) {
      const h = holder(w);
      await w.settle();
      const hold = holder(w, 'W');
      await w.settle();
      await w.advance(500, 50); // H holds a while: W's grant comes later than its try
      h.release();
      await w.settle();
      assert.deepEqual(w.ran, ['H', 'W']);
      const token = w.store.leases.get(KEY)?.token;
      const lapses = [];
      for (let t = 0; t < 3 * TTL; t += 50) {
        await w.advance(50, 50);
        const lease = w.store.leases.get(KEY);
        if (!lease || lease.token !== token || lease.expires <= w.clock.now()) lapses.push(w.clock.now());
      }
      assert.deepEqual(lapses, [], "W's lease was live in the store at every step");
      hold.release();
    },
  },
  {
    name: "a lease held outside the engine lapses with waiters queued (no grant on expiry): the waiters poll and take it in turn",
    async run(w) {
      assert.ok(await w.store.acquire(KEY, 'outsider', TTL));
      w.start('W1');
      await w.settle();
      w.start('W2');
      await w.settle();
      await w.advance(TTL + 2000, 50);
      assert.deepEqual(w.ran, ['W1', 'W2']);
    },
  },
  {
    // A store that offers grants inside `release` can hand the lease to an owner whose
    // try it has answered ("held") before the engine has read that answer: nobody
    // listens yet, so the grant is released, and the waiter takes the key at its next
    // poll (50 ms) instead. Order and exclusion hold; only that turn is slower.
    name: 'callbacks that start the next execution as they end: each runs in turn, one at a time',
    async run(w) {
      const h = holder(w);
      await w.settle();
      let left = 6;
      const next = (i) => {
        w.start(`L${i}`, {
          body: () => {
            if (--left > 0) next(i + 1);
            return i;
          },
        });
      };
      w.start('W1', { body: () => (next(1), 'W1') });
      await w.settle();
      h.release();
      await w.settle();
      await w.advance(1000, 10);
      assert.deepEqual(w.ran, ['H', 'W1', 'L1', 'L2', 'L3', 'L4', 'L5', 'L6']);
    },
  },
  {
    name: 'manual leases (acquireLock): handed over in order; one aborted while queued passes its grant on',
    async run(w) {
      const h = holder(w);
      await w.settle();
      const leases = [];
      const controller = new AbortController();
      const order = [];
      for (const [i, signal] of [[1, controller.signal], [2, undefined], [3, undefined]]) {
        const rec = { name: `M${i}`, settled: 0 };
        w.execs.set(rec.name, rec);
        api.acquireLock(w.store, KEY, TTL, { wait: 10_000, signal, timeProvider: w.clock }).then(
          (lease) => {
            rec.settled += 1;
            rec.outcome = { value: lease };
            order.push(rec.name);
            leases.push(lease);
          },
          (error) => ((rec.settled += 1), (rec.outcome = { error })),
        );
        await w.settle();
      }
      controller.abort('gone');
      await w.settle();
      h.release();
      await w.settle(30);
      assert.deepEqual(order, ['M2']);
      assert.equal(leases[0].fencingToken, w.store.leases.get(KEY)?.token);
      assert.equal(await leases[0].release(), true);
      await w.settle(30);
      assert.deepEqual(order, ['M2', 'M3']);
      assert.equal(await leases[1].release(), true);
      assert.equal(error(w, 'M1'), 'gone');
    },
  },
  {
    name: 'waiters of two pipelines on one engine, in arrival order',
    async run(w) {
      const p1 = w.pipeline({ ttl: 2000, wait: 5000 });
      const p2 = w.pipeline({ ttl: 5000, wait: Infinity });
      const h = holder(w, 'H', { pipeline: p1 });
      await w.settle();
      for (let i = 1; i <= 6; i++) {
        w.start(`W${i}`, { pipeline: i % 2 ? p2 : p1 });
        await w.settle();
      }
      h.release();
      await w.settle(60);
      assert.deepEqual(w.ran, ['H', 'W1', 'W2', 'W3', 'W4', 'W5', 'W6']);
    },
  },
  {
    name: 'waiters of two engines (two clocks) on one store, in arrival order',
    clocks: 2,
    async run(w) {
      const p1 = w.pipeline({}, 0);
      const p2 = w.pipeline({}, 1);
      const h = holder(w, 'H', { pipeline: p1 });
      await w.settle();
      for (let i = 1; i <= 6; i++) {
        w.start(`W${i}`, { pipeline: i % 2 ? p2 : p1 });
        await w.settle();
      }
      h.release();
      await w.settle(60);
      assert.deepEqual(w.ran, ['H', 'W1', 'W2', 'W3', 'W4', 'W5', 'W6']);
    },
  },
];

describe('the engine over a store that grants on release', () => {
  for (const scenario of SCENARIOS) {
    test(scenario.name, async () => {
      for (const variant of VARIANTS) {
        const label = `${scenario.name} [${variant.label}]`;
        // Answers held back by `w.hold(method)`: the next call of that method answers when
        // the returned deferred settles.
        const holds = [];
        const gate = (method) => {
          const at = holds.findIndex((h) => h.method === method && !h.taken);
          if (at < 0) return undefined;
          holds[at].taken = true;
          return holds[at].d.promise;
        };
        const w = world({ deliver: variant.deliver, age: variant.age, gate, ...scenario.store }, scenario.clocks ?? 1);
        w.hold = (method) => {
          const d = deferred();
          holds.push({ method, d, taken: false });
          return d;
        };
        try {
          await scenario.run(w);
        } catch (e) {
          e.message = `${label}: ${e.message}`;
          throw e;
        }
        await w.check(label);
      }
    });
  }
});
