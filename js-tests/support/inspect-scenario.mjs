// The inspection scenario every store is tested with (and the store kit's inspect
// cases): a key held by a manual lease with two executions queued behind it, each
// through its own store object (so that each reaches the server as a waiter of its
// own). `inspect()` reads the key through any store on the same server.

import assert from 'node:assert/strict';
import { acquireLock, withLock } from './leasehold.mjs';
import { pollUntil } from './async.mjs';

/**
 * Holds `key` on `holderStore` and queues one `withLock` per store of `waiterStores`,
 * in that order, each waiting until `inspect()` shows it. Each waiter's callback
 * records what `inspect()` shows while it holds the key. Returns `{ lease, runs }`:
 * `runs` resolve to those inspections, in the order the waiters ran.
 */
export async function holdWithWaiters({ holderStore, waiterStores, key, ttl = 10_000, inspect }) {
  const lease = await acquireLock(holderStore, key, ttl);
  assert.ok(lease, `${key}: the holder got the lease`);
  const seen = [];
  const runs = [];
  for (const [i, store] of waiterStores.entries()) {
    runs.push(
      withLock({ key, store, ttl, wait: 30_000 }, async () => {
        seen.push({ waiter: i, inspection: await inspect() });
      }),
    );
    await pollUntil(`waiter ${i} of ${key} in the queue`, async () => (await inspect())?.waiters.length === i + 1, {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
  }
  return {
    lease,
    async finish() {
      await lease.release();
      await Promise.all(runs);
      return seen;
    },
  };
}

/**
 * Checks the inspection of a key held by `lease` with two waiters, then that the
 * waiters run in the order inspected, each seen as the holder while it runs.
 * `since` checks a waiter's `since` (the store's clock), when the store records one.
 */
export async function checkHeldWithTwoWaiters(scenario, inspection, { ttl = 10_000, since } = {}) {
  const { lease } = scenario;
  assert.equal(inspection.holders.length, 1);
  const [holder] = inspection.holders;
  assert.equal(holder.owner, lease.owner, 'the holder is the lease');
  assert.equal(holder.fencingToken, lease.fencingToken, "the holder's token is the lease's");
  assert.ok(holder.ttl > 0 && holder.ttl <= ttl, `time left ${holder.ttl} within the ttl ${ttl}`);
  assert.equal(inspection.waiters.length, 2);
  const owners = inspection.waiters.map((w) => w.owner);
  assert.equal(new Set([...owners, lease.owner]).size, 3, 'three owners');
  for (const w of inspection.waiters) {
    assert.match(w.owner, /[0-9a-f]{32}$/, 'an engine-drawn owner');
    if (since) since(w.since);
  }
  if (since) assert.ok(inspection.waiters[0].since <= inspection.waiters[1].since, 'queue order is arrival order');
  const ran = await scenario.finish();
  assert.deepEqual(
    ran.map((r) => r.waiter),
    [0, 1],
    'the waiters ran in the order they queued',
  );
  assert.deepEqual(
    ran.map((r) => r.inspection.holders[0].owner),
    owners,
    'each ran as the owner inspect showed for it, in the order shown',
  );
  assert.ok(ran[0].inspection.holders[0].fencingToken > lease.fencingToken, 'tokens rise');
  assert.deepEqual(
    ran[0].inspection.waiters.map((w) => w.owner),
    owners.slice(1),
    'the second waiter still waits while the first holds',
  );
}
