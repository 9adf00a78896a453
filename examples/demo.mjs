// The leasehold demo: two workers contend for one account on the built-in memory
// store, on fake time so the story takes milliseconds to tell.
//
//   1. Worker A takes the lock on 'account:1' and starts a slow balance update.
//   2. Worker B wants the same account: it waits.
//   3. A's connection to the lock store breaks. A's renewals fail; the engine retries
//      while the lease is valid, then declares it lost and aborts A's signal.
//   4. B gets the lock with a larger fencing token and writes.
//   5. A, a stale holder that ignored its signal, tries to write anyway: the database
//      compares fencing tokens and rejects the write.
import {
  engine,
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockLostError,
  getLockToken,
} from 'leasehold';

const clock = new FakeTimeProvider();
const say = (who, text) => console.log(`[t=${String(clock.now()).padStart(4)} ms] ${who.padEnd(8)} ${text}`);
const settle = () => new Promise((resolve) => setImmediate(resolve));

// A lock store behind a network link that can break (any LockStore works here).
const memory = new MemoryLockStore({ timeProvider: clock });
let partitioned = false;
const store = {
  acquire: (key, owner, ttl) => memory.acquire(key, owner, ttl),
  renew: async (key, owner, ttl) => {
    if (partitioned) throw new Error('connection reset by peer');
    return memory.renew(key, owner, ttl);
  },
  release: (key, owner) => memory.release(key, owner),
};

// The protected resource: it remembers the largest token it has seen (`fence`) and
// refuses writes that carry a smaller one — `UPDATE … WHERE fence <= $token` in SQL.
const account = { balance: 100, fence: 0 };
function write(who, token, balance) {
  if (token < account.fence) {
    say(who, `write balance=${balance} with token ${token} → REJECTED (fence is ${account.fence})`);
    return false;
  }
  account.fence = token;
  account.balance = balance;
  say(who, `write balance=${balance} with token ${token} → accepted`);
  return true;
}

const pipeline = new ResiliencePipelineBuilder({
  timeProvider: clock,
  telemetry: (e) => e.type === 'renewalFailed' && say('engine', `renewal failed (${e.error.message}); retrying while the lease is valid`),
})
  .addLock({
    key: 'account:1',
    ttl: '3s',
    wait: '10s',
    store,
    onLockLost: ({ key }) => say('engine', `lease on ${key} lost: aborting worker A's signal`),
  })
  .build();

console.log(`leasehold demo (engine: ${engine})\n`);

const workerA = pipeline
  .execute(async ({ signal }) => {
    const token = getLockToken();
    say('worker A', `holds account:1 with fencing token ${token}; reading balance ${account.balance}`);
    partitioned = true;
    say('network', "worker A's link to the lock store breaks");
    // A slow update that ignores its signal (the bug fencing protects against).
    await new Promise((resolve) => signal.addEventListener('abort', resolve));
    say('worker A', `signal aborted: ${signal.reason instanceof LockLostError ? 'LockLostError' : signal.reason}`);
    await laterThan(() => account.fence > token);
    write('worker A', token, account.balance - 30);
  })
  .catch((error) => say('worker A', `execution failed: ${error.name}`));

await settle();
const workerB = pipeline.execute(async () => {
  const token = getLockToken();
  partitioned = false;
  say('worker B', `got the lock after waiting, fencing token ${token}`);
  write('worker B', token, account.balance + 50);
});
say('worker B', 'account:1 is held: waiting (up to 10 s)');

// Drive fake time forward in small steps, letting promises settle between them.
for (let i = 0; i < 60; i++) {
  clock.advance(100);
  await settle();
}
await Promise.all([workerA, workerB]);
console.log(`\nfinal balance ${account.balance}, fence ${account.fence}: the stale write was rejected.`);

async function laterThan(condition) {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}
