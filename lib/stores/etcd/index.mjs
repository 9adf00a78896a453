// ESM entry of `leasehold/etcd`. The implementation lives in ./etcd.cjs so that
// `import` and `require` share one class (instanceof works across both).
import cjs from './index.cjs';

export const EtcdLockStore = cjs.EtcdLockStore;
