// Entry for Cloudflare Workers (the `workerd` condition). workerd forbids compiling wasm
// from bytes, so the module is imported precompiled (wrangler and miniflare turn a `.wasm`
// import into a `WebAssembly.Module`). The Worker needs the `nodejs_compat` (or
// `nodejs_als`) compatibility flag for AsyncLocalStorage, which makes `getLockToken()`
// work across `await`: without it this import does not resolve and the entry does not
// load. (A guarded dynamic import would need a computed specifier, which bundlers and
// miniflare refuse.)
import { AsyncLocalStorage } from 'node:async_hooks';
import wasmModule from '../../dist/wasm/leasehold_wasm_bg.wasm';
import { createLoadedApi } from './wasm-api.mjs';

// workerd cancels a request that waits for a promise only another request's I/O can
// resolve, and runs a callback in the request whose release granted it: a wait on the
// isolate's memory store cannot be served across requests. It fails at once instead.
const MEMORY_WAIT_REFUSED =
  'wait must be 0 on a MemoryLockStore in workerd: a request waiting for a lock that another request ' +
  'holds would be cancelled by workerd as hung (one request cannot resolve a promise another waits on). ' +
  'Use wait: 0 and answer 409 or retry on LockNotAcquiredError, or DurableObjectLockStore from ' +
  "'leasehold/durable-object', which waits through a Durable Object";
const api = createLoadedApi(wasmModule, AsyncLocalStorage, MEMORY_WAIT_REFUSED);

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
