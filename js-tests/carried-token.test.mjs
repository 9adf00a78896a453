// The token a release carries to a store that hands leases over locally: the holder's,
// the one its callback ran under, whether the store granted it or a local handoff did,
// with one lock and with two. The host takes it from the execution (a release from
// `finish`) or asks the engine; both must say the same.
// Run: node --test js-tests/carried-token.test.mjs (LEASEHOLD_ENGINE=wasm for wasm).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeTimeProvider, ResiliencePipelineBuilder, getLockToken } from 'leasehold';
import { handoffStore } from './support/handoff-store.mjs';

/** A handoff store that records, per release, the owner's key and the token carried. */
function recordingStore(clock) {
  const store = handoffStore(clock);
  const release = store.release;
  store.released = [];
  store.release = (key, owner, options) => {
    store.released.push({ key, token: options?.fencingToken });
    return release(key, owner, options);
  };
  return store;
}

test('a release carries the token its callback ran under, granted by the store or handed over', async () => {
  const clock = new FakeTimeProvider(1_000_000);
  const store = recordingStore(clock);
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'k', ttl: 5000, store, wait: 1000 }).build();
  const seen = [];
  const run = () =>
    pipeline.execute(async () => {
      seen.push(getLockToken());
      await null;
    });
  // One alone (the store grants it), then three at once: whether the store grants each
  // or a holder hands the lease on locally, the lease's last holder releases it.
  await run();
  await Promise.all([run(), run(), run()]);
  assert.equal(seen.length, 4);
  assert.ok(seen.every((t, i) => i === 0 || t > seen[i - 1]), `tokens rise: ${seen}`);
  const carried = store.released.map((r) => r.token);
  assert.equal(carried[0], seen[0], 'the first execution carries its own token');
  assert.equal(carried.at(-1), seen.at(-1), 'the last holder carries its own token');
  assert.ok(carried.every((t) => seen.includes(t)), `every release carries a token a callback ran under: ${carried} of ${seen}`);
  assert.ok(carried.every((t, i) => i === 0 || t > carried[i - 1]), 'in order');
});

test('with two locks, each release carries its own lock\'s token', async () => {
  const clock = new FakeTimeProvider(1_000_000);
  const outer = recordingStore(clock);
  const inner = recordingStore(clock);
  const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
    .addLock({ key: 'a', ttl: 5000, store: outer })
    .addLock({ key: 'b', ttl: 5000, store: inner })
    .build();
  let innermost;
  await pipeline.execute(() => {
    innermost = getLockToken();
  });
  assert.equal(inner.released.length, 1);
  assert.equal(outer.released.length, 1);
  assert.equal(inner.released[0].token, innermost, 'the inner lock carries the token the callback ran under');
  assert.ok(Number.isSafeInteger(outer.released[0].token) && outer.released[0].token > 0, 'the outer lock carries its own token');
});
