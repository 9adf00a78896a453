// ESM entry for Node and Bun: the same instance as the CommonJS entry, so both share
// one engine, one default store and one set of error classes.
import api from './index.cjs';

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
