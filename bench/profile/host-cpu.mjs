// Diagnosis for scenario 4: the CPU that leasehold's engine and host add to an execution
// on a JS store, without Redis or a socket (whose noise, on a shared machine, hides a
// few microseconds). The store is a RedisLockStore over a stand-in client whose
// `evalsha` resolves at once, so every layer runs as in scenario 4 but the network:
//   direct          the two EVALSHA calls the store makes, straight on the client
//   store           RedisLockStore.acquire + release
//   pipeline-noals  execute() through the engine and host, without AsyncLocalStorage
//   pipeline        as shipped, with AsyncLocalStorage
// Each variant runs in its own process, interleaved over rounds; medians of ns per
// execution.
//
//   node bench/profile/host-cpu.mjs [rounds=3] [count=200000]
// (LEASEHOLD_ENGINE=wasm for the wasm engine; needs dist/: `bash scripts/build.sh`)

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { runAsChild, runChild } from '../support/children.mjs';
import { hostApi } from '../support/host-api.mjs';
import { median } from '../support/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const require = createRequire(import.meta.url);
const OWNER = '0123456789abcdef0123456789abcdef';
const TTL = 10_000;

/** An ioredis look-alike that answers every script at once: ACQUIRE with a token, RELEASE with 1. */
function instantClient() {
  let token = 1_795_999_229_586_969;
  const client = {
    calls: 0,
    evalsha(_sha, numKeys, ...given) {
      client.calls += 1;
      // Keys and arguments come as two arrays (the store's ioredis adapter), flattened by ioredis.
      const rest = given.flat();
      // RELEASE's second argument is its settings ("<hand-off ms> <check> [channel]"),
      // ACQUIRE's the ttl: RELEASE also carries the holder's token, so the count of
      // arguments does not tell them apart.
      return Promise.resolve(String(rest[numKeys + 1]).includes(' ') ? 1 : token++);
    },
    eval() {
      return Promise.reject(new Error('eval is not expected: evalsha never fails here'));
    },
  };
  return client;
}

function variantRun(variant, client) {
  if (variant === 'direct') {
    const keys = ['b:{k}', 'b:{k}:token', 'b:{k}:queue', 'b:{k}:waiters'];
    return async () => {
      await client.evalsha('acquire', 4, ...keys, OWNER, String(TTL), '1');
      await client.evalsha('release', 4, ...keys, OWNER, '10 1 ');
    };
  }
  const { RedisLockStore } = require('../../lib/stores/redis/index.cjs');
  const store = new RedisLockStore({ client, prefix: 'b' });
  if (variant === 'store') {
    return async () => {
      await store.acquire('k', OWNER, TTL, { queue: false });
      await store.release('k', OWNER);
    };
  }
  const api = hostApi({ asyncLocalStorage: variant === 'pipeline' });
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ key: 'k', ttl: TTL, store }).build();
  const noop = async () => 0;
  return () => pipeline.execute(noop);
}

await runAsChild(async ({ variant, count }) => {
  const client = instantClient();
  const run = variantRun(variant, client);
  for (let i = 0; i < 20_000; i++) await run();
  const calls0 = client.calls;
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await run();
  const ns = ((performance.now() - t0) / count) * 1e6;
  const callsPerExecution = (client.calls - calls0) / count;
  if (callsPerExecution !== 2) throw new Error(`expected 2 store calls per execution, got ${callsPerExecution}`);
  return { ns };
});

const rounds = Number(process.argv[2] ?? 3);
const count = Number(process.argv[3] ?? 200_000);
const variants = ['direct', 'store', 'pipeline-noals', 'pipeline'];
const results = Object.fromEntries(variants.map((v) => [v, []]));
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < variants.length; i++) {
    const v = variants[(i + r) % variants.length];
    results[v].push((await runChild(SELF, { variant: v, count })).ns);
  }
}
console.log(`engine ${process.env.LEASEHOLD_ENGINE || 'native'}; ${rounds} rounds × ${count}; medians, ns per execution`);
let previous;
for (const v of variants) {
  const ns = median(results[v]);
  const added = previous === undefined ? '' : `  (+${Math.round(ns - previous)} ns over the line above)`;
  console.log(`${v.padEnd(15)} ${String(Math.round(ns)).padStart(6)} ns${added}`);
  previous = ns;
}
