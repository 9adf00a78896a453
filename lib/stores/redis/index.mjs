// ESM entry of `leasehold/redis`. The implementation lives in ./redis.cjs so that
// `import` and `require` share one class (instanceof works across both).
import cjs from './index.cjs';

export const RedisLockStore = cjs.RedisLockStore;
