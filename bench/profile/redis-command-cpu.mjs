// Diagnosis for scenario 8r: the client CPU one Redis command costs on the bench's ioredis
// client (support/redis-client.mjs), and one pub/sub message received, so that a
// library's fleet CPU per execution can be read as commands × their cost. On a 2-core
// machine shared by 8 client processes and Redis, throughput follows CPU per execution.
//   incr, 1 at a time     sequential INCR on one key (µs of this process's CPU per command)
//   incr, 8 at a time     8 loops at once on the one client (8r's shape)
//   evalsha               a one-line script (SET ... PX), sequential
//   message received      PUBLISH from another connection of this process, counted on a
//                         subscriber, minus the sender's cost: a lower bound (each message
//                         arrives in the same wake-up as the publisher's reply; a waiter
//                         woken by a message alone also pays the wake-up)
// Redis's own CPU per command is read from INFO commandstats (usec_per_call).
//
//   node bench/profile/redis-command-cpu.mjs [count=20000] [rounds=3]

import { commandStats, startRedisServer } from '../../js-tests/support/redis.mjs';
import { connect } from '../support/redis-client.mjs';
import { median } from '../support/stats.mjs';

const COUNT = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 3);

/** CPU µs of this process per operation of `run`, which does `COUNT` of them. */
async function cpuPer(run) {
  const cpu0 = process.cpuUsage();
  await run();
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / COUNT;
}

const server = await startRedisServer();
try {
  const client = await connect(server.port);
  const publisher = await connect(server.port);
  const subscriber = await connect(server.port);
  const sha = await client.script('LOAD', "return redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000)");
  let received = 0;
  let wake;
  subscriber.on('message', () => {
    received += 1;
    if (received === COUNT) wake();
  });
  await subscriber.subscribe('bench:grants');
  const variants = {
    'incr, 1 at a time': async () => {
      for (let i = 0; i < COUNT; i++) await client.incr('bench:n');
    },
    'incr, 8 at a time': async () => {
      let left = COUNT;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (left-- > 0) await client.incr('bench:n');
        }),
      );
    },
    evalsha: async () => {
      for (let i = 0; i < COUNT; i++) await client.evalsha(sha, 1, 'bench:s', 'owner');
    },
    // Published from this process too, so the publisher's CPU is measured apart below.
    'publish (sender side)': async () => {
      for (let i = 0; i < COUNT; i++) await publisher.publish('bench:none', 'x');
    },
  };
  const results = Object.fromEntries([...Object.keys(variants), 'message received (subscriber side)'].map((k) => [k, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, run] of Object.entries(variants)) results[name].push(await cpuPer(run));
    // A message received: publish COUNT to the subscribed channel, minus the sender's cost.
    received = 0;
    const done = new Promise((resolve) => {
      wake = resolve;
    });
    const both = await cpuPer(async () => {
      for (let i = 0; i < COUNT; i++) await publisher.publish('bench:grants', 'x');
      await done;
    });
    results['message received (subscriber side)'].push(both - median(results['publish (sender side)']));
  }
  const stats = await commandStats(server.port);
  console.log(`client CPU µs per operation (median of ${ROUNDS} rounds of ${COUNT}); Redis µs per call from INFO commandstats`);
  for (const [name, xs] of Object.entries(results)) console.log(`${name.padEnd(36)} ${median(xs).toFixed(1).padStart(7)}`);
  for (const cmd of ['incr', 'evalsha', 'publish']) {
    const s = stats[cmd] ?? stats[`cmdstat_${cmd}`];
    if (s) console.log(`Redis: ${cmd.padEnd(29)} ${Number(s.usec_per_call).toFixed(1).padStart(7)}`);
  }
  client.disconnect();
  publisher.disconnect();
  subscriber.disconnect();
} finally {
  await server.stop();
}
