// Declarations of `import 'leasehold/postgres'`: postgres.d.ts, as an ES module (lib/stores/postgres/index.mjs is one).
export * from './postgres.js';
