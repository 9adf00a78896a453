// Declarations of `import 'leasehold/postgres'`: postgres.d.ts, as an ES module (lib/postgres.mjs is one).
export * from './postgres.js';
