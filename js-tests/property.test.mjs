// Property-based: random interleavings of executions, aborts, store failures and time on
// FakeTimeProvider. Never two live holders of a key, tokens strictly increasing per key,
// every lost holder's signal aborted, every execution settles. Runs once per engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ResiliencePipelineBuilder, FakeTimeProvider, MemoryLockStore, LOCK_TOKEN } from './support/leasehold.mjs';
import { flush } from './support/time.mjs';

const KEYS = ['a', 'b'];

const command = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('start'),
      key: fc.constantFrom(...KEYS),
      store: fc.constantFrom('memory', 'js'),
      ttl: fc.integer({ min: 30, max: 3000 }),
      wait: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 4000 })),
      work: fc.integer({ min: 0, max: 5000 }),
      fails: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort'), nth: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('advance'), ms: fc.integer({ min: 1, max: 1500 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('storeFaults'),
      renew: fc.constantFrom('ok', 'throw', 'false', 'hang'),
      acquire: fc.constantFrom('ok', 'throw'),
    }),
  },
);

async function scenario(commands) {
  const clock = new FakeTimeProvider();
  const memory = new MemoryLockStore({ timeProvider: clock });
  // A JS store in front of its own memory store, with switchable faults.
  const backing = new MemoryLockStore({ timeProvider: clock });
  const faults = { renew: 'ok', acquire: 'ok' };
  const js = {
    acquire: (...a) => (faults.acquire === 'throw' ? Promise.reject(new Error('acquire down')) : backing.acquire(...a)),
    renew: (...a) => {
      if (faults.renew === 'throw') return Promise.reject(new Error('renew down'));
      if (faults.renew === 'false') return Promise.resolve(false);
      if (faults.renew === 'hang') return new Promise(() => {});
      return backing.renew(...a);
    },
    release: (...a) => backing.release(...a),
  };
  const stores = { memory, js };
  const sleepers = [];
  const sleep = (ms) => new Promise((resolve) => sleepers.push({ at: clock.now() + ms, resolve }));
  const wakeSleepers = () => {
    for (let i = sleepers.length - 1; i >= 0; i--) {
      if (sleepers[i].at <= clock.now()) sleepers.splice(i, 1)[0].resolve();
    }
  };
  const step = async (ms) => {
    clock.advance(ms);
    wakeSleepers();
    await flush(2);
  };

  const inside = new Map(); // `${store}:${key}` -> Set of live holders
  const lastToken = new Map();
  const executions = [];
  const violations = [];
  const lostWithoutAbort = [];

  for (const cmd of commands) {
    if (cmd.kind === 'start') {
      const { key, store, ttl, wait, work, fails } = cmd;
      const where = `${store}:${key}`;
      const controller = new AbortController();
      const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
        .addLock({
          key,
          ttl,
          wait,
          store: stores[store],
          onLockLost: ({ context }) => {
            if (!context.signal.aborted) lostWithoutAbort.push(where);
          },
        })
        .build();
      const record = { settled: false, controller };
      record.promise = pipeline
        .execute(
          async ({ signal, properties }) => {
            const token = properties.get(LOCK_TOKEN);
            const holders = inside.get(where) ?? new Set();
            inside.set(where, holders);
            for (const other of holders) if (!other.aborted) violations.push(`two live holders of ${where} at ${clock.now()}`);
            const previous = lastToken.get(where) ?? -1;
            if (!(token > previous)) violations.push(`token ${token} after ${previous} on ${where}`);
            lastToken.set(where, token);
            holders.add(signal);
            try {
              await sleep(work);
              if (fails) throw new Error('callback failed');
              return 'done';
            } finally {
              holders.delete(signal);
            }
          },
          { signal: controller.signal },
        )
        .then(
          () => (record.settled = true),
          () => (record.settled = true),
        );
      executions.push(record);
      await flush(2);
    } else if (cmd.kind === 'abort') {
      const pending = executions.filter((e) => !e.settled);
      if (pending.length) pending[cmd.nth % pending.length].controller.abort(new Error('caller abort'));
      await flush(2);
    } else if (cmd.kind === 'advance') {
      await step(cmd.ms);
    } else {
      faults.renew = cmd.renew;
      faults.acquire = cmd.acquire;
    }
  }
  // Heal the store and let time run out: every execution must settle.
  faults.renew = 'ok';
  faults.acquire = 'ok';
  for (let i = 0; i < 200 && executions.some((e) => !e.settled); i++) await step(100);
  const unsettled = executions.filter((e) => !e.settled).length;
  return { violations, lostWithoutAbort, unsettled };
}

test('random interleavings keep every lock rule', { timeout: 120_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(command, { minLength: 10, maxLength: 60, size: "max" }), async (commands) => {
      const { violations, lostWithoutAbort, unsettled } = await scenario(commands);
      assert.deepEqual(violations, []);
      assert.deepEqual(lostWithoutAbort, []);
      assert.equal(unsettled, 0, 'every execution settles');
    }),
    { numRuns: 150 },
  );
});
