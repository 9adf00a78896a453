'use strict';
// Loads the wasm engine for Node and Bun: the wasm-bindgen `nodejs` glue, CommonJS, which
// compiles the package's one .wasm file synchronously (no top-level await), or throws
// when it was not built.
const path = require('node:path');
const { checkDuration } = require('./durations.cjs');

const dir = path.join(__dirname, '..', '..', 'dist', 'wasm');

function load() {
  let wasm;
  try {
    wasm = require(path.join(dir, 'leasehold_wasm.cjs'));
  } catch (error) {
    if (error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes('leasehold_wasm.cjs')) {
      throw new Error(`the wasm engine is not built (no ${dir}): run 'bash scripts/build-wasm.sh'`, { cause: error });
    }
    throw error;
  }
  wasm.keepPanics();
  return { Engine: wasm.WasmEngine, checkDuration, takePanic: wasm.takePanic };
}

module.exports = { load };
