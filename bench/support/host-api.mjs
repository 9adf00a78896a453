// leasehold's API built from its host directly, so that a diagnostic can leave
// AsyncLocalStorage out and measure what it costs.

import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * The API on `engine` ('native' or 'wasm'; LEASEHOLD_ENGINE, else native, when not
 * given), with AsyncLocalStorage carrying the token as shipped, or without it
 * (`asyncLocalStorage: false`: no promise hooks, as in browsers).
 */
export function hostApi({ engine = process.env.LEASEHOLD_ENGINE || 'native', asyncLocalStorage = true } = {}) {
  const { createApi } = require('../../lib/host/api.cjs');
  const binding = engine === 'native' ? require('../../lib/entries/native.cjs').load() : require('../../lib/entries/wasm-node.cjs').load();
  return createApi(binding, { engine, AsyncLocalStorage: asyncLocalStorage ? AsyncLocalStorage : undefined });
}
