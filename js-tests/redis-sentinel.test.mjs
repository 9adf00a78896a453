// RedisLockStore behind Redis Sentinel (a primary, 2 replicas, 3 Sentinels, real
// servers on loopback), with ioredis's Sentinel connection and node-redis's
// createSentinel: the primary is SIGKILLed while one process holds the key and three
// wait. Fenced writes to a resource kept by the test: tokens never go back, every
// waiter is served after the failover, locking resumes within the failover plus one
// ttl, and every process exits on its own.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fencingViolations, runFailover } from './support/failover-run.mjs';
import { startSentinelGroup } from './support/redis-failover.mjs';

const TTL = 1500;
// Catches a hang, not a slow machine: locking resumes within the failover plus one ttl;
// the rest is a loaded CI machine's scheduling.
const SLACK_MS = 5000;

// npm test runs ioredis here and node-redis on the Cluster (redis-cluster-failover.test.mjs),
// a failover each; `npm run soak` runs both clients on both (LEASEHOLD_FAILOVER=full).
const KINDS = process.env.LEASEHOLD_FAILOVER === 'full' ? ['ioredis', 'node-redis'] : ['ioredis'];

for (const kind of KINDS) {
  describe(`Sentinel failover, ${kind}`, { timeout: 150_000 }, () => {
    let group;
    before(async () => {
      group = await startSentinelGroup();
    });
    after(async () => {
      await group?.stop();
    });

    test('the primary killed under a holder and three waiters: tokens keep rising, all are served, all exit', async () => {
      const settings = { kind, topology: 'sentinel', sentinels: group.sentinels, name: group.name, key: `sentinel-${kind}` };
      const run = await runFailover(settings, async () => {
        const old = await group.killPrimary();
        await group.waitForNewPrimary(old);
        return { promotedAt: performance.now() };
      }, { ttl: TTL });
      const context = JSON.stringify({ results: run.results, exits: run.exits, failoverMs: run.failoverMs, resumedMs: run.resumedMs, stderr: run.stderr });
      for (const exit of run.exits) assert.deepEqual(exit, { code: 0, signal: null }, context);
      for (const result of run.results) assert.deepEqual(result.other, [], context);
      // every waiter was served twice after the failover (re-queued, never forgotten)
      for (const result of run.results.slice(1)) assert.equal(result.done, 2, context);
      assert.deepEqual(run.resource.duplicates, [], 'no token started two holds');
      assert.deepEqual(fencingViolations(run.holds), []);
      // accepted writes are in token order by construction; none of a later hold was refused
      for (const r of run.resource.rejected) {
        assert.ok(run.holds.some((h) => h.token > r.token && h.start < r.at), `a refused write had no later holder: ${JSON.stringify(r)}`);
      }
      assert.ok(run.resumedMs <= run.failoverMs + TTL + SLACK_MS, `locking resumed ${Math.round(run.resumedMs)} ms after the kill; failover took ${Math.round(run.failoverMs)} ms`);
      console.log(`# ${kind} through Sentinel: failover ${Math.round(run.failoverMs)} ms, locking resumed ${Math.round(run.resumedMs)} ms after the kill, ${run.holds.length} holds, ${run.resource.rejected.length} stale writes refused, holder ${JSON.stringify(run.results[0])}`);
    });
  });
}
