// A process that builds and runs pipelines and reports what of OpenTelemetry it loaded
// (js-tests/opentelemetry.test.mjs). `blocked`: `@opentelemetry/*` does not resolve, as
// where it is not installed; `unregistered`: it resolves, but no provider is registered.
'use strict';
const Module = require('node:module');

const mode = process.argv[2];
let lookups = 0;
if (mode === 'blocked') {
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    if (request.startsWith('@opentelemetry/')) {
      lookups += 1;
      const error = new Error(`Cannot find module '${request}'`);
      error.code = 'MODULE_NOT_FOUND';
      throw error;
    }
    return resolve.call(this, request, ...rest);
  };
}

const { ResiliencePipelineBuilder, withLock } = require('leasehold');

(async () => {
  let value;
  let fastLock;
  for (let i = 0; i < 3; i++) {
    const pipeline = new ResiliencePipelineBuilder().addLock({ key: `k${i}`, name: 'child' }).build();
    fastLock = pipeline.fastLock;
    value = await pipeline.execute(() => 'done');
  }
  await withLock('k', () => undefined);
  const loaded = Object.keys(require.cache).filter((file) => file.includes('@opentelemetry') || file.includes('otel/recorder'));
  process.stdout.write(JSON.stringify({ loaded, lookups, fastLock, value }));
})();
