// Entry for Cloudflare Workers (the `workerd` condition). workerd forbids compiling wasm
// from bytes, so the module is imported precompiled (wrangler and miniflare turn a `.wasm`
// import into a `WebAssembly.Module`). The Worker needs the `nodejs_compat` (or
// `nodejs_als`) compatibility flag for AsyncLocalStorage, which makes `getLockToken()`
// work across `await`: without it this import does not resolve and the entry does not
// load. (A guarded dynamic import would need a computed specifier, which bundlers and
// miniflare refuse.)
import { AsyncLocalStorage } from 'node:async_hooks';
import wasmModule from '../dist/wasm/web/leasehold_wasm_bg.wasm';
import { createWasmApi, initSync } from './wasm-api.mjs';

initSync({ module: wasmModule });
const api = createWasmApi(AsyncLocalStorage);

export const {
  engine,
  engineFallbackReason,
  ResiliencePipelineBuilder,
  ResiliencePipeline,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  LockLostError,
  LockStoreError,
  isRejection,
  getLockToken,
  LOCK_TOKEN,
  acquireLock,
  withLock,
} = api;
export default api;
