// What the wasm ES module entries (browser, workerd, Deno) share: the wasm-bindgen `web`
// glue and the host, generated from lib/host.cjs by scripts/build-wasm.sh. Each entry
// instantiates the module its own way, then builds the API here.
import { createApi } from '../dist/wasm/host.mjs';
import { WasmEngine, checkDuration, keepPanics, takePanic } from '../dist/wasm/web/leasehold_wasm.js';

export { default as init, initSync } from '../dist/wasm/web/leasehold_wasm.js';

/**
 * The API on the wasm engine; `AsyncLocalStorage` where the runtime has one;
 * `memoryWaitRefused`: why this runtime cannot wait on an in-process store (workerd).
 */
export function createWasmApi(AsyncLocalStorage, memoryWaitRefused) {
  keepPanics();
  return createApi({ Engine: WasmEngine, checkDuration, takePanic }, { engine: 'wasm', AsyncLocalStorage, memoryWaitRefused });
}
