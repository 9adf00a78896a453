// Declarations of `import 'leasehold/redis'`: redis.d.ts, as an ES module (lib/stores/redis/index.mjs is one).
export * from './redis.js';
