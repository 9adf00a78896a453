// The API on a wasm module instantiated at import, synchronously, for the entries whose
// runtime allows it (workerd hands over a compiled module, Deno reads the bytes): the
// wasm-bindgen `web` glue, and the host and duration check, generated from lib/host/api.cjs
// and lib/entries/durations.cjs by scripts/build-wasm.sh. `init()` has nothing left to do there; it checks its options.
import { createApi } from '../../dist/wasm/host.mjs';
import { checkDuration } from '../../dist/wasm/durations.mjs';
import { checkInitOptions } from '../../dist/wasm/init-options.mjs';
import { WasmEngine, initSync, keepPanics, takePanic } from '../../dist/wasm/leasehold_wasm.mjs';

/**
 * `module`: a `WebAssembly.Module` or the module's bytes; `AsyncLocalStorage` where the
 * runtime has one; `memoryWaitRefused`: why this runtime cannot wait on an in-process
 * store (workerd).
 */
export function createLoadedApi(module, AsyncLocalStorage, memoryWaitRefused) {
  initSync({ module });
  keepPanics();
  const api = createApi(
    { Engine: WasmEngine, checkDuration, takePanic },
    { engine: 'wasm', AsyncLocalStorage, memoryWaitRefused },
  );
  api.init = async function init(options) {
    checkInitOptions(options);
  };
  return api;
}
