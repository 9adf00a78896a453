// Declarations of `import 'leasehold/testing'`: testing.d.ts, as an ES module (lib/testing/index.mjs is one).
export * from './testing.js';
