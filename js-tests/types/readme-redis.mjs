/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import { Redis } from 'ioredis';
import { withLock } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const store = new RedisLockStore({ client: redis });

const report = await withLock('cron:nightly-report', async ({ signal }) => {
  // build the report; `signal` aborts if the lease is lost
  return 'built';
}, { store, ttl: '1m', skipOnLockFailure: true }); // held elsewhere: skip
console.log(report ?? 'another instance is building it');

await store.close();
await redis.quit();
