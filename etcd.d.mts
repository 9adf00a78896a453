// Declarations of `import 'leasehold/etcd'`: etcd.d.ts, as an ES module (lib/etcd.mjs is one).
export * from './etcd.js';
