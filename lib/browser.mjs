// Entry for browsers and web workers (the `browser` and `worker` conditions): the wasm
// engine, fetched and compiled from the package's `dist/wasm/web/` (bundlers that
// understand `new URL(..., import.meta.url)` copy it along).
//
// Browsers have no AsyncLocalStorage: `getLockToken(context)` works while the callback runs, and
// `getLockToken()` without a context sees the lock only during the synchronous part of
// the callback; after its first `await` it returns undefined.
import { createWasmApi, init } from './wasm-api.mjs';

await init({ module_or_path: new URL('../dist/wasm/web/leasehold_wasm_bg.wasm', import.meta.url) });
const api = createWasmApi(undefined);

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
