// Pipelines with fixed keys, built, run once and dropped, round after round: the engine's
// copy of each key must go with its pipeline. Run as
//   node --expose-gc js-tests/support/defined-locks.mjs <rounds> <pipelines> <keyBytes>
// (LEASEHOLD_ENGINE picks the engine); prints one JSON line per round: the engine's count
// of defined locks, RSS and, on wasm, the wasm memory's size, each after a gc.

// The wasm module's memory, caught as it is instantiated (the package does not expose it,
// and the module's export names are shortened: it is found by its type).
let wasmMemory;
const Instance = WebAssembly.Instance;
WebAssembly.Instance = function instance(module, imports) {
  const created = new Instance(module, imports);
  wasmMemory ??= Object.values(created.exports).find((value) => value instanceof WebAssembly.Memory);
  return created;
};
const api = (await import('leasehold')).default;
WebAssembly.Instance = Instance;

const [rounds = 2, pipelines = 10_000, keyBytes = 64 * 1024] = process.argv.slice(2).map(Number);
const { ResiliencePipelineBuilder, engine: engineName } = api;
const host = api[Symbol.for('leasehold.internals')].hostOf(undefined);
const gc = globalThis.gc;
if (typeof gc !== 'function') throw new Error('run with --expose-gc');
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Collects garbage until the engine holds no defined lock (finalizers run in later turns). */
async function collect() {
  for (let i = 0; i < 50 && host.engine.definedLocks() > 0; i++) {
    gc();
    await pause(10);
  }
  gc();
}

const filler = 'x'.repeat(keyBytes);
for (let round = 0; round <= rounds; round++) {
  // Round 0 warms up (a few pipelines); the others build `pipelines` each.
  const count = round === 0 ? 100 : pipelines;
  for (let i = 0; i < count; i++) {
    // A key of its own per pipeline: `keyBytes` plus a prefix, flattened on its way in.
    const key = `${round}:${i}:${filler}`;
    const value = await new ResiliencePipelineBuilder().addLock({ key }).build().execute(() => i);
    if (value !== i) throw new Error(`pipeline ${i} answered ${value}`);
    // Now and then a turn of the event loop, where collected pipelines' finalizers run,
    // as they do in any program that does I/O between executions.
    if (i % 250 === 249) {
      gc();
      await pause(0);
    }
  }
  await collect();
  console.log(
    JSON.stringify({
      engine: engineName,
      round,
      pipelines: count,
      defined: host.engine.definedLocks(),
      rss: process.memoryUsage().rss,
      wasmBytes: wasmMemory?.buffer.byteLength,
    }),
  );
}
