// ESM entry of `leasehold/testing`: the same function as the CommonJS entry.
import cjs from './index.cjs';

export const testLockStore = cjs.testLockStore;
