// Entry for browsers and web workers (the `browser` and `worker` conditions): the wasm
// engine, loaded on first use or by `init()` (lib/entries/wasm-lazy.mjs). No top-level await.
//
// Browsers have no AsyncLocalStorage: `getLockToken(context)` works while the callback runs, and
// `getLockToken()` without a context sees the lock only during the synchronous part of
// the callback; after its first `await` it returns undefined.
import { createLazyApi } from './wasm-lazy.mjs';

// The package's module, written as `new URL('…', import.meta.url)` so that bundlers that
// follow it (Vite, webpack, Rollup with a plugin) copy the file and rewrite the URL.
const api = createLazyApi(() => new URL('../../dist/wasm/leasehold_wasm_bg.wasm', import.meta.url));

export const {
  engine,
  init,
  engineFallbackReason,
  ResiliencePipelineBuilder,
  ResiliencePipeline,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  LockLostError,
  LockStoreError,
  LockLimitMismatchError,
  isRejection,
  getLockToken,
  LOCK_TOKEN,
  acquireLock,
  withLock,
  campaign,
  lead,
  leader,
  watchLeader,
} = api;
export default api;
