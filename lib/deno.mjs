// Entry for Deno (the `deno` condition): the wasm engine, read from the package's
// `dist/wasm/web/` (needs --allow-read), with AsyncLocalStorage from `node:async_hooks`, so
// `getLockToken()` works across `await`. For the native addon in Deno, import
// `leasehold/node` instead (with --allow-ffi --allow-read --allow-env).
import { AsyncLocalStorage } from 'node:async_hooks';
import { createWasmApi, init } from './wasm-api.mjs';

await init({ module_or_path: await Deno.readFile(new URL('../dist/wasm/web/leasehold_wasm_bg.wasm', import.meta.url)) });
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
