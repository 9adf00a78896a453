// Diagnosis for scenario 4: where leasehold's time goes per uncontended Redis execution,
// layer by layer, each variant in its own process, interleaved over rounds:
//   floor          SET NX PX + EVALSHA compare-and-delete (two round trips)
//   floor-eval     the same, its SET NX PX sent as a one-line script (EVALSHA)
//   floor-args     floor-eval with as many keys and arguments as leasehold's ACQUIRE
//                  and RELEASE (4 keys + 3 and 4 keys + 2), the scripts unchanged:
//                  what the arguments alone cost
//   scripts        leasehold's own ACQUIRE + RELEASE scripts (read from lib/stores/redis/index.cjs),
//                  sent with EVALSHA straight from ioredis: the server-side cost
//   store          RedisLockStore.acquire + release called directly: + the store's JS
//   pipeline-noals the engine and host without AsyncLocalStorage: + the engine
//   pipeline       as shipped: + AsyncLocalStorage
// Also reads the server's own time per call (INFO commandstats, usec_per_call).
//
//   node bench/profile/redis-layers.mjs [rounds=3] [count=10000]

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { commandStats, startRedisServer, call } from '../../js-tests/support/redis.mjs';
import { runAsChild, runChild } from '../support/children.mjs';
import { hostApi } from '../support/host-api.mjs';
import { connect } from '../support/redis-client.mjs';
import { gaps, median, quantiles } from '../support/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const require = createRequire(import.meta.url);

function leaseholdScript(name) {
  const { RedisLockStore } = require('../../lib/stores/redis/index.cjs');
  return RedisLockStore[Symbol.for('leasehold.redis.scripts')][name];
}

async function variantRun(variant, client) {
  const ttl = 10_000;
  if (variant === 'floor') {
    const sha = await client.script('LOAD', "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0");
    return async () => {
      await client.set('floor:k', 'owner-0123456789abcdef0123456789ab', 'PX', ttl, 'NX');
      await client.evalsha(sha, 1, 'floor:k', 'owner-0123456789abcdef0123456789ab');
    };
  }
  if (variant === 'floor-eval' || variant === 'floor-args') {
    const del = await client.script('LOAD', "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0");
    const set = await client.script('LOAD', "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])");
    const owner = 'owner-0123456789abcdef0123456789ab';
    if (variant === 'floor-eval') {
      return async () => {
        await client.evalsha(set, 1, 'floor:{k}', owner, String(ttl));
        await client.evalsha(del, 1, 'floor:{k}', owner);
      };
    }
    const keys = ['floor:{k}', 'floor:{k}:token', 'floor:{k}:queue', 'floor:{k}:waiters'];
    return async () => {
      await client.evalsha(set, 4, ...keys, owner, String(ttl), '1');
      await client.evalsha(del, 4, ...keys, owner, '10 1 ');
    };
  }
  if (variant === 'scripts') {
    const acquire = await client.script('LOAD', leaseholdScript('ACQUIRE'));
    const release = await client.script('LOAD', leaseholdScript('RELEASE'));
    const owner = '0123456789abcdef0123456789abcdef';
    return async () => {
      const keys = ['bench:{k}', 'bench:{k}:token', 'bench:{k}:queue', 'bench:{k}:waiters'];
      await client.evalsha(acquire, 4, ...keys, owner, String(ttl), '1');
      await client.evalsha(release, 4, ...keys, owner, '10 1 ');
    };
  }
  const { RedisLockStore } = require('../../lib/stores/redis/index.cjs');
  const store = new RedisLockStore({ client, prefix: 'bench' });
  if (variant === 'store') {
    const owner = '0123456789abcdef0123456789abcdef';
    // As the engine asks on a store that grants on release, not yet listening.
    return async () => {
      await store.acquire('k', owner, ttl, { queue: false });
      await store.release('k', owner);
    };
  }
  const api = hostApi({ asyncLocalStorage: variant === 'pipeline' });
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ key: 'k', ttl, store }).build();
  const noop = async () => 0;
  return () => pipeline.execute(noop);
}

await runAsChild(async ({ variant, port, count }) => {
  const client = await connect(port);
  const run = await variantRun(variant, client);
  for (let i = 0; i < 1000; i++) await run();
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await run();
    stamps[i + 1] = performance.now();
  }
  const q = quantiles(gaps(stamps, count));
  return { opsPerSec: (count / (stamps[count] - stamps[0])) * 1000, p50: q.p50 };
});

const rounds = Number(process.argv[2] ?? 3);
const count = Number(process.argv[3] ?? 10_000);
const variants = ['floor', 'floor-eval', 'floor-args', 'scripts', 'store', 'pipeline-noals', 'pipeline'];
const server = await startRedisServer();
const results = Object.fromEntries(variants.map((v) => [v, []]));
const serverUs = {};
try {
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < variants.length; i++) {
      const v = variants[(i + r) % variants.length];
      await call(server.port, ['CONFIG', 'RESETSTAT']);
      results[v].push(await runChild(SELF, { variant: v, port: server.port, count }));
      const stats = await commandStats(server.port);
      serverUs[v] ??= [];
      serverUs[v].push(
        Object.entries(stats)
          .filter(([name]) => ['set', 'evalsha'].includes(name))
          .map(([name, s]) => `${name} ${s.usec_per_call.toFixed(1)} µs`)
          .join(', '),
      );
    }
  }
} finally {
  await server.stop();
}
console.log(`engine ${process.env.LEASEHOLD_ENGINE || 'native'}; ${rounds} rounds × ${count}; medians; ratio: per-round to floor`);
for (const v of variants) {
  const ops = median(results[v].map((x) => x.opsPerSec));
  const p50 = median(results[v].map((x) => x.p50));
  const ratio = median(results[v].map((x, i) => x.opsPerSec / results.floor[i].opsPerSec));
  const dp50 = median(results[v].map((x, i) => x.p50 - results.floor[i].p50));
  console.log(
    `${v.padEnd(15)} ${Math.round(ops).toString().padStart(7)} ops/s  p50 ${(p50 * 1000).toFixed(1).padStart(6)} µs  (+${(dp50 * 1000).toFixed(1)} µs vs floor)  ×floor ${ratio.toFixed(2)}  server: ${serverUs[v].at(-1)}`,
  );
}
