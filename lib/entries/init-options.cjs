'use strict';
// What `init(options)` accepts, in every entry: where the wasm module comes from, chosen
// by the app (a bundler that does not copy the package's `.wasm` file, a CDN, bytes the
// app already has).
const { describe, checkOptionNames } = require('../common/describe.cjs');

const WASM_KINDS =
  "a URL (a string or a URL), a Request, a Response or a promise of one, a WebAssembly.Module, or the module's bytes (an ArrayBuffer or a typed array)";

const isA = (value, name) => typeof globalThis[name] === 'function' && value instanceof globalThis[name];

/** The `wasm` source `options` names, or undefined for the package's own file. Throws a TypeError for anything else. */
function checkInitOptions(options) {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`init options must be an object, got ${describe(options)}`);
  }
  checkOptionNames(options, ['wasm'], 'init');
  const { wasm } = options;
  if (
    wasm === undefined ||
    (typeof wasm === 'string' && wasm !== '') ||
    isA(wasm, 'URL') ||
    isA(wasm, 'Request') ||
    isA(wasm, 'Response') ||
    isA(wasm, 'ArrayBuffer') ||
    ArrayBuffer.isView(wasm) ||
    (typeof WebAssembly === 'object' && wasm instanceof WebAssembly.Module) ||
    (wasm !== null && typeof wasm === 'object' && typeof wasm.then === 'function')
  ) {
    return wasm;
  }
  throw new TypeError(`wasm must be ${WASM_KINDS}, got ${describe(wasm)}`);
}

module.exports = { checkInitOptions };
