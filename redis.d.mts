// Declarations of `import 'leasehold/redis'`: redis.d.ts, as an ES module (lib/redis.mjs is one).
export * from './redis.js';
