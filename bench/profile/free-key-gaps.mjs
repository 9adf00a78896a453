// Diagnosis for scenario 5: runs the fleet of contended-trace.mjs (8 processes × 500,
// each warmed up first) and watches its key from outside, listing the periods over 3 ms
// when the key was free while owners were queued for it: a release that should have
// handed the key on, or woken the first waiter, and did not. Each gap shows the queue's
// length, its turn (the waiters hash's field '') and its first owner's entry.
//
//   node bench/profile/free-key-gaps.mjs
//
// (Found: a process that closed its store and client right after a release within its
// turn left the key free until a queued owner polled.)

import { startRedisServer } from '../../js-tests/support/redis.mjs';
import { startFleet } from '../support/children.mjs';
import { connect } from '../support/redis-client.mjs';

const TRACE = new URL('./contended-trace.mjs', import.meta.url).pathname;
const LEASE = 'trace:{k}';
const server = await startRedisServer();
const client = await connect(server.port);
try {
  const fleet = await startFleet(8, TRACE, { port: server.port, key: 'k', count: 500, warmup: 1000 }, { timeoutMs: 120_000 });
  for (const f of fleet) f.go();
  let done = false;
  const finished = Promise.all(fleet.map((f) => f.result)).finally(() => {
    done = true;
  });
  const gaps = [];
  let gap;
  const t0 = performance.now();
  while (!done) {
    const [exists, queued] = await Promise.all([client.exists(LEASE), client.llen(`${LEASE}:queue`)]);
    const now = performance.now() - t0;
    if (exists === 0 && queued > 0) {
      if (gap === undefined) {
        const [turn, first] = await Promise.all([client.hget(`${LEASE}:waiters`, ''), client.lindex(`${LEASE}:queue`, 0)]);
        gap = { at: now, queued, turn, first, entry: first ? await client.hget(`${LEASE}:waiters`, first) : null };
      }
    } else if (gap !== undefined) {
      if (now - gap.at > 3) gaps.push({ ...gap, ms: now - gap.at });
      gap = undefined;
    }
  }
  await finished;
  console.log(`${gaps.length} periods over 3 ms with the key free and owners queued`);
  for (const g of gaps) {
    console.log(`  at ${g.at.toFixed(1)} ms for ${g.ms.toFixed(1)} ms: ${g.queued} queued, turn "${g.turn}", first ${g.first} "${g.entry}"`);
  }
} finally {
  client.disconnect();
  await server.stop();
}
