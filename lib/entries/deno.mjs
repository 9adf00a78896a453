// Entry for Deno (the `deno` condition): the wasm engine, read from the package's
// `dist/wasm/` at import (needs --allow-read), with AsyncLocalStorage from `node:async_hooks`, so
// `getLockToken()` works across `await`. For the native addon in Deno, import
// `leasehold/node` instead (with --allow-ffi --allow-read --allow-env).
import { AsyncLocalStorage } from 'node:async_hooks';
import { createLoadedApi } from './wasm-api.mjs';

const api = createLoadedApi(Deno.readFileSync(new URL('../../dist/wasm/leasehold_wasm_bg.wasm', import.meta.url)), AsyncLocalStorage);

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
