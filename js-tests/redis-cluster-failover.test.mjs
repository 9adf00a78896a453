// RedisLockStore on a Redis Cluster whose 3 masters have a replica each (real servers on
// loopback), with ioredis and node-redis: the master serving the key is SIGKILLed while
// one process holds the key and three wait, and its replica is promoted. The same
// figures as the Sentinel test: tokens never go back, every waiter is served after the
// failover, locking resumes within the failover plus one ttl, every process exits.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fencingViolations, runFailover } from './support/failover-run.mjs';
import { startReplicatedCluster } from './support/redis-failover.mjs';

const TTL = 1500;
const SLACK_MS = 5000; // catches a hang, not a slow machine

// npm test runs node-redis here and ioredis through Sentinel (redis-sentinel.test.mjs), a
// failover each; `npm run soak` runs both clients on both (LEASEHOLD_FAILOVER=full).
const KINDS = process.env.LEASEHOLD_FAILOVER === 'full' ? ['ioredis', 'node-redis'] : ['node-redis'];

for (const kind of KINDS) {
  describe(`Cluster failover, ${kind}`, { timeout: 150_000 }, () => {
    let cluster;
    before(async () => {
      cluster = await startReplicatedCluster();
    });
    after(async () => {
      await cluster?.stop();
    });

    test('the key\'s master killed under a holder and three waiters: tokens keep rising, all are served, all exit', async () => {
      const key = `cluster-${kind}`;
      const settings = { kind, topology: 'cluster', nodes: cluster.nodes, key };
      const run = await runFailover(settings, async () => {
        const old = await cluster.masterFor(`{${key}}`);
        await cluster.killNode(old);
        await cluster.waitForPromotion(`{${key}}`, old);
        return { promotedAt: performance.now() };
      }, { ttl: TTL });
      const context = JSON.stringify({ results: run.results, exits: run.exits, failoverMs: run.failoverMs, resumedMs: run.resumedMs, stderr: run.stderr });
      for (const exit of run.exits) assert.deepEqual(exit, { code: 0, signal: null }, context);
      for (const result of run.results) assert.deepEqual(result.other, [], context);
      for (const result of run.results.slice(1)) assert.equal(result.done, 2, context);
      assert.deepEqual(run.resource.duplicates, [], 'no token started two holds');
      assert.deepEqual(fencingViolations(run.holds), []);
      for (const r of run.resource.rejected) {
        assert.ok(run.holds.some((h) => h.token > r.token && h.start < r.at), `a refused write had no later holder: ${JSON.stringify(r)}`);
      }
      assert.ok(run.resumedMs <= run.failoverMs + TTL + SLACK_MS, `locking resumed ${Math.round(run.resumedMs)} ms after the kill; failover took ${Math.round(run.failoverMs)} ms`);
      console.log(`# ${kind} on a Cluster: failover ${Math.round(run.failoverMs)} ms, locking resumed ${Math.round(run.resumedMs)} ms after the kill, ${run.holds.length} holds, ${run.resource.rejected.length} stale writes refused, holder ${JSON.stringify(run.results[0])}`);
    });
  });
}
