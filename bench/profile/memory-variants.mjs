// Diagnosis for scenarios 1 and 3: where leasehold's time goes on the memory store.
// Runs the scenario loops of bench/memory.mjs for variants that take one cost away:
//   - leasehold-<engine>: as shipped (AsyncLocalStorage carries the token)
//   - leasehold-<engine>-noals: the same host built without AsyncLocalStorage (the
//     browser path: getLockToken() works only synchronously), i.e. no promise hooks
//   - async-mutex, and async-mutex-als: async-mutex in a process where an
//     AsyncLocalStorage has been entered once (promise hooks on, as leasehold does)
// each in its own child process, interleaved, several rounds; prints medians.
//
//   node bench/profile/memory-variants.mjs [uncontended|contention] [rounds=5]

import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { runAsChild, runChild } from '../support/children.mjs';
import { hostApi } from '../support/host-api.mjs';
import { gaps, median, quantiles } from '../support/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const require = createRequire(import.meta.url);

async function makeRun(variant) {
  if (variant.startsWith('async-mutex')) {
    if (variant.endsWith('-als')) new AsyncLocalStorage().run(1, () => {});
    // Its CommonJS build: `import` would get its slower ESM build.
    const { Mutex } = require('async-mutex');
    const mutex = new Mutex();
    return (fn) => mutex.runExclusive(fn);
  }
  const [, engine, noals] = variant.split('-');
  const api = hostApi({ engine, asyncLocalStorage: !noals });
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ key: 'k', ttl: 30_000, wait: Infinity }).build();
  return (fn) => pipeline.execute(fn);
}

async function uncontended(run, count = 200_000) {
  const noop = async () => 0;
  for (let i = 0; i < 20_000; i++) await run(noop);
  const stamps = new Float64Array(count + 1);
  stamps[0] = performance.now();
  for (let i = 0; i < count; i++) {
    await run(noop);
    stamps[i + 1] = performance.now();
  }
  const q = quantiles(gaps(stamps, count));
  return { opsPerSec: (count / (stamps[count] - stamps[0])) * 1000, p50: q.p50, p99: q.p99 };
}

async function contention(run, tasks = 64, perTask = 1000) {
  const handoffs = new Float64Array(tasks * perTask);
  let n = 0;
  let releasedAt = -1;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: tasks }, async () => {
      for (let i = 0; i < perTask; i++) {
        await run(async () => {
          const start = performance.now();
          if (releasedAt >= 0) handoffs[n++] = start - releasedAt;
          await null;
          releasedAt = performance.now();
        });
      }
    }),
  );
  const q = quantiles(handoffs, n);
  return { opsPerSec: ((tasks * perTask) / (performance.now() - t0)) * 1000, p50: q.p50, p99: q.p99 };
}

await runAsChild(async ({ variant, scenario }) => {
  const run = await makeRun(variant);
  return scenario === 'contention' ? contention(run) : uncontended(run);
});

const scenario = process.argv[2] ?? 'uncontended';
const rounds = Number(process.argv[3] ?? 5);
const variants = ['async-mutex', 'async-mutex-als', 'leasehold-native', 'leasehold-native-noals', 'leasehold-wasm', 'leasehold-wasm-noals'];
const results = Object.fromEntries(variants.map((v) => [v, []]));
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < variants.length; i++) {
    const v = variants[(i + r) % variants.length];
    results[v].push(await runChild(SELF, { variant: v, scenario }));
  }
}
const base = results['async-mutex'];
console.log(`${scenario}, ${rounds} rounds, medians; ratio = median of per-round ratios to async-mutex`);
console.log('variant                  ops/s      p50 µs   p99 µs   × async-mutex');
for (const v of variants) {
  const m = (f) => median(results[v].map((x) => x[f]));
  const ratio = median(results[v].map((x, i) => x.opsPerSec / base[i].opsPerSec));
  console.log(
    `${v.padEnd(24)} ${Math.round(m('opsPerSec')).toString().padStart(8)} ${(m('p50') * 1000).toFixed(2).padStart(8)} ${(m('p99') * 1000).toFixed(2).padStart(8)}   ${ratio.toFixed(2)}`,
  );
}
