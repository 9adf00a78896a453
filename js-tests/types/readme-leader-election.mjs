/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import { Redis } from 'ioredis';
import { lead } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const store = new RedisLockStore({ client: redis });
const shutdown = new AbortController();
process.once('SIGTERM', () => shutdown.abort());

await lead('scheduler', async ({ term, signal }) => {
  console.log(`leading, term ${term}`);
  while (!signal.aborted) {
    // Enqueue the jobs that are due. Fence each write with the term, so that a deposed
    // leader's late write is refused: ... SET fence = $term WHERE ... AND fence <= $term
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  console.log('stepped down');
}, { store, ttl: '10s', name: `scheduler-${process.pid}`, signal: shutdown.signal });

await store.close();
await redis.quit();
