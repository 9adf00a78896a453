'use strict';
// `require('leasehold')` on Node and Bun: the native addon where one for this platform
// loads (lib/entries/native.cjs says where it looks), the wasm module otherwise, with the reason
// in `engineFallbackReason`. LEASEHOLD_ENGINE=wasm (or =native) forces a choice; `engine`
// says which one runs.
const { AsyncLocalStorage } = require('node:async_hooks');
const { createApi } = require('../host/api.cjs');
const { checkInitOptions } = require('./init-options.cjs');
const { ownerPrefix } = require('./owner-prefix.cjs');

function pickEngine() {
  const wanted = process.env.LEASEHOLD_ENGINE;
  if (wanted !== undefined && wanted !== '' && wanted !== 'native' && wanted !== 'wasm') {
    throw new TypeError(`LEASEHOLD_ENGINE must be 'native' or 'wasm', got '${wanted}'`);
  }
  if (wanted === 'wasm') {
    return { engine: 'wasm', binding: require('./wasm-node.cjs').load(), engineFallbackReason: 'LEASEHOLD_ENGINE=wasm' };
  }
  try {
    return { engine: 'native', binding: require('./native.cjs').load(), engineFallbackReason: undefined };
  } catch (error) {
    if (wanted === 'native') {
      throw new Error(`LEASEHOLD_ENGINE=native, but the native addon did not load: ${error.message}`, { cause: error });
    }
    return { engine: 'wasm', binding: require('./wasm-node.cjs').load(), engineFallbackReason: error.message };
  }
}

/**
 * Whether Node runs AsyncLocalStorage on AsyncContextFrame (by default from Node 24; on
 * Node 22 behind a flag): a store entered in a promise job is then left when the job ends.
 */
function hasContextFrame() {
  if (process.versions.bun !== undefined || typeof globalThis.Deno !== 'undefined') return false;
  const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  if (flags.includes('--no-async-context-frame')) return false;
  return Number(process.versions.node.split('.')[0]) >= 24 || flags.includes('--experimental-async-context-frame');
}

const { engine, binding, engineFallbackReason } = pickEngine();
module.exports = createApi(binding, {
  engine,
  engineFallbackReason,
  AsyncLocalStorage,
  enterInJob: hasContextFrame(),
  ownerPrefix: ownerPrefix(),
  // An optional peer, looked for at the first pipeline build, not here. The require sits
  // in a try block so that bundlers treat the package as optional.
  loadOpenTelemetry() {
    let api;
    try {
      api = require('@opentelemetry/api');
    } catch {
      return undefined;
    }
    return { api, PipelineTelemetry: require('../otel/recorder.cjs').PipelineTelemetry };
  },
});
// The engine loaded with this module; `init()` is there for code shared with browsers.
module.exports.init = async function init(options) {
  checkInitOptions(options);
};
// `import leasehold from 'leasehold'` compiled to CommonJS without esModuleInterop reads
// `.default` (index.d.ts declares a default export). Not enumerable: the names a
// `require` lists stay the API's own.
Object.defineProperty(module.exports, 'default', { value: module.exports });
