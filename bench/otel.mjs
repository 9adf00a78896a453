// What OpenTelemetry costs scenario 1 (sequential executions of one pipeline on one key
// of the default memory store): each mode in its own child process, rounds interleaved,
// medians printed as a markdown table.
//
//   node bench/otel.mjs [--rounds=5] [--count=200000] [--base=other/checkout/lib/entries/index.cjs] [--modes=absent,metrics]
//
// Modes: `absent` (`@opentelemetry/*` made unresolvable, as where it is not installed),
// `unregistered` (the API resolves, no provider registered), `metrics` (the SDK's meter
// provider with a reader), `metrics+traces` (and a tracer provider whose processor drops
// every span). `--base` also times another checkout's Node entry (say, main's, with this
// checkout's dist/ and node_modules/ linked beside its lib/) without OpenTelemetry, in
// the same rounds: the row `absent (base)`.

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const MODES = ['absent', 'unregistered', 'metrics', 'metrics+traces'];

async function child(mode, entry, count) {
  const Module = (await import('node:module')).default;
  if (mode === 'absent') {
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (request, ...rest) {
      if (request.startsWith('@opentelemetry/')) throw Object.assign(new Error(`no ${request}`), { code: 'MODULE_NOT_FOUND' });
      return resolve.call(this, request, ...rest);
    };
  }
  if (mode.startsWith('metrics')) {
    const { metrics, trace } = await import('@opentelemetry/api');
    const { MeterProvider, MetricReader } = await import('@opentelemetry/sdk-metrics');
    class Reader extends MetricReader {
      async onForceFlush() {}
      async onShutdown() {}
    }
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new Reader()] }));
    if (mode === 'metrics+traces') {
      const { BasicTracerProvider } = await import('@opentelemetry/sdk-trace-base');
      const drop = { onStart() {}, onEnd() {}, forceFlush: async () => {}, shutdown: async () => {} };
      trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [drop] }));
    }
  }
  const require = Module.createRequire(import.meta.url);
  const api = require(entry);
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ key: 'bench:uncontended', ttl: 30_000 }).build();
  const noop = async () => 0;
  for (let i = 0; i < count / 10; i++) await pipeline.execute(noop);
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await pipeline.execute(noop);
  const ms = performance.now() - t0;
  process.stdout.write(JSON.stringify({ opsPerSec: (count / ms) * 1000, engine: api.engine }));
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main() {
  const rounds = Number(arg('rounds', 5));
  const count = Number(arg('count', 200_000));
  const lib = path.join(BENCH, '..', 'lib', 'entries', 'index.cjs');
  const base = arg('base', undefined);
  const modes = arg('modes', MODES.join(',')).split(',');
  if (!modes.includes('absent')) modes.unshift('absent');
  const runs = modes.map((mode) => ({ label: mode, mode, lib }));
  if (base !== undefined) runs.unshift({ label: 'absent (base)', mode: 'absent', lib: path.resolve(base) });
  const engines = ['native', 'wasm'];
  const results = new Map();
  for (let r = 0; r < rounds; r++) {
    for (const engine of engines) {
      // Rotated each round, so that no mode always runs first.
      for (let i = 0; i < runs.length; i++) {
        const { label, mode, lib: at } = runs[(i + r) % runs.length];
        const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, at, String(count)], {
          encoding: 'utf8',
          env: { ...process.env, LEASEHOLD_ENGINE: engine },
          timeout: 120_000,
        });
        if (out.status !== 0) throw new Error(`${label} on ${engine}: ${out.stderr}`);
        const key = `${engine} ${label}`;
        results.set(key, [...(results.get(key) ?? []), JSON.parse(out.stdout).opsPerSec]);
      }
    }
  }
  console.log(`scenario 1, ${count} executions, median of ${rounds} rounds\n`);
  // A ratio is the median of the rounds' ratios: both sides measured in the same round.
  console.log('| engine | mode | ops/s | vs absent | range of the rounds\' ratios |');
  console.log('| --- | --- | ---: | ---: | ---: |');
  for (const engine of engines) {
    const absent = results.get(`${engine} absent`);
    for (const { label: mode } of runs) {
      const ops = results.get(`${engine} ${mode}`);
      const ratios = ops.map((o, r) => o / absent[r]);
      const range = `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`;
      console.log(`| ${engine} | ${mode} | ${Math.round(median(ops)).toLocaleString('en')} | ${median(ratios).toFixed(2)} | ${range} |`);
    }
  }
}

if (process.argv[2] === '--child') await child(process.argv[3], process.argv[4], Number(process.argv[5]));
else await main();
