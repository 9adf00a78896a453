// One instance of a service that runs a nightly job. Deploy it on every machine: each
// instance tries, one runs the job, the others skip it.
//
//   REDIS_URL=redis://127.0.0.1:6379 node nightly-job.mjs
import Redis from 'ioredis';
import { ResiliencePipelineBuilder, getLockToken, isRejection } from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const store = new RedisLockStore({ client: redis });

const day = new Date().toISOString().slice(0, 10);
const job = `nightly-report:${day}`;
const me = `instance ${process.pid}`;

// Fail fast (wait: 0): if another instance holds the lock, it is running the job.
// The lease is renewed every ttl/3 while the job runs, however long it takes.
const nightly = new ResiliencePipelineBuilder().addLock({ key: job, store, ttl: '30s', wait: 0 }).build();

const outcome = await nightly.settle(async ({ signal }) => {
  // The lock stops two instances running the job at the same time; this marker stops an
  // instance that starts after the job finished from running it again today.
  if (await redis.exists(`${job}:done`)) return 'already done';
  await buildReport(signal);
  await redis.set(`${job}:done`, String(getLockToken()), 'EX', 36 * 3600);
  return 'ran';
});

if (outcome.ok && outcome.value === 'ran') console.log(`${me}: ran ${job}`);
else if (outcome.ok) console.log(`${me}: skipped ${job} (already done today)`);
else if (isRejection(outcome.error)) console.log(`${me}: skipped ${job} (another instance is running it)`);
else {
  console.error(`${me}: ${job} failed:`, outcome.error);
  process.exitCode = 1;
}
redis.disconnect();

/** The job itself: here, a second of pretend work that stops if the lease is lost. */
async function buildReport(signal) {
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, Number(process.env.JOB_MS ?? 1000));
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
}
