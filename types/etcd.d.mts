// Declarations of `import 'leasehold/etcd'`: etcd.d.ts, as an ES module (lib/stores/etcd/index.mjs is one).
export * from './etcd.js';
