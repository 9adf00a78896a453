// The long soak (`npm run soak`): 1,000,000 executions on the memory store, real clock.
// Heap and RSS must stay flat, no timer may be left, and the process must exit as soon as
// the work ends. Then 2 rounds of 10,000 pipelines with 64 KB fixed keys, each built, run
// once and dropped: the engine must keep none of their keys after a gc.
// Prints one line per sample and a closing verdict; exits 1 on a breach.
import { ResiliencePipelineBuilder, MemoryLockStore, engine } from 'leasehold';
import { runDefinedLockRounds } from './support/defined-locks-check.mjs';

const TOTAL = Number(process.env.SOAK_EXECUTIONS ?? 1_000_000);
const SAMPLES = 10;
// After warm-up, the heap may wander within this much; a leak of even a few bytes per
// execution (1,000,000 × 8 B = 8 MB) would break it.
const HEAP_BOUND = 4 * 1024 * 1024;
const RSS_BOUND = Number(process.env.SOAK_RSS_BOUND ?? 32 * 1024 * 1024);

const store = new MemoryLockStore();
const fixed = new ResiliencePipelineBuilder().addLock({ key: 'soak', store }).build();
const perKey = new ResiliencePipelineBuilder().addLock({ key: (c) => c.operationKey, store, ttl: '5s' }).build();
const gc = globalThis.gc ?? (() => {});

function sample() {
  gc();
  const { heapUsed, rss } = process.memoryUsage();
  return { heapUsed, rss };
}

const started = performance.now();
let baseline;
const per = TOTAL / SAMPLES;
for (let s = 0; s < SAMPLES; s++) {
  for (let i = 0; i < per; i++) {
    // Alternate one hot key with ever-new keys (which must not accumulate), and a
    // contended pair now and then.
    if (i % 3 === 0) await perKey.execute(() => i, { operationKey: `k${s}-${i}` });
    else if (i % 100 === 1) await Promise.all([fixed.execute(async () => i), fixed.execute(() => i).catch(() => 0)]);
    else await fixed.execute(() => i);
  }
  const m = sample();
  // V8 grows its young generation over the first few hundred thousand executions: the
  // baseline is taken once it has settled.
  if (s === 3) baseline = m;
  console.log(
    `soak ${engine}: ${((s + 1) * per).toLocaleString('en')} executions, heap ${(m.heapUsed / 1048576).toFixed(1)} MiB, rss ${(m.rss / 1048576).toFixed(1)} MiB, store size ${store.size}`,
  );
  if (baseline && (m.heapUsed - baseline.heapUsed > HEAP_BOUND || m.rss - baseline.rss > RSS_BOUND)) {
    console.log(`soak: FAILED — memory grew past the bound (heap +${m.heapUsed - baseline.heapUsed} B, rss +${m.rss - baseline.rss} B)`);
    process.exit(1);
  }
}
const seconds = (performance.now() - started) / 1000;
const defined = runDefinedLockRounds({ engine, rounds: 2, pipelines: 10_000 });
for (const r of defined.rounds) {
  const wasm = r.wasmBytes === undefined ? '' : `, wasm memory ${(r.wasmBytes / 1048576).toFixed(1)} MiB`;
  console.log(`soak ${engine}: ${r.pipelines.toLocaleString('en')} pipelines with 64 KB keys, then gc: ${r.defined} locks defined, rss ${(r.rss / 1048576).toFixed(1)} MiB${wasm}`);
}
if (defined.problems.length > 0) {
  console.log(`soak: FAILED — ${defined.problems.join('; ')}`);
  process.exit(1);
}
// The engine lets go of its timer as it goes idle; one more turn costs nothing here.
await new Promise((resolve) => setImmediate(resolve));
const timers = process.getActiveResourcesInfo().filter((r) => r === 'Timeout');
if (store.size !== 0 || timers.length > 0) {
  console.log(`soak: FAILED — store size ${store.size}, live timers ${timers.length}`);
  process.exit(1);
}
console.log(`soak: ${TOTAL.toLocaleString('en')} executions in ${seconds.toFixed(1)} s; heap within ${HEAP_BOUND / 1048576} MiB and rss within ${RSS_BOUND / 1048576} MiB of the warm-up; no timer left`);
const exitStarted = performance.now();
process.on('exit', () => console.log(`soak: process exited ${(performance.now() - exitStarted).toFixed(0)} ms after the work ended`));
