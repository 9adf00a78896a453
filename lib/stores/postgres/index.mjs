// ESM entry of `leasehold/postgres`. The implementation lives in ./postgres.cjs so that
// `import` and `require` share one class (instanceof works across both).
import cjs from './index.cjs';

export const PostgresLockStore = cjs.PostgresLockStore;
