// Leader election on etcd (issue #31), against a real single-member cluster: five
// candidate processes on one key; the leader SIGKILLed, SIGSTOPped past its ttl and
// resumed, and etcd killed and restarted under a leader (support/election-scenarios.mjs);
// resign() handing over in this process. Every wait is bounded; times are printed.
// Run: node --test js-tests/election-etcd.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine)

import { after, before, test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { EtcdLockStore } from 'leasehold/etcd';
import { startEtcdCluster } from './support/etcd.mjs';
import { runFleetScenarios, resignHandsOver, lapseHandsOver, watchFollows } from './support/election-scenarios.mjs';

let cluster;
const clients = [];

before(async () => {
  cluster = await startEtcdCluster(1);
});

after(async () => {
  for (const client of clients) client.close();
  await cluster?.stop();
});

test('etcd: five processes; SIGKILL, SIGSTOP and etcd restarted', async (t) => {
  const [member] = cluster.members;
  await runFleetScenarios(t, {
    kind: 'etcd',
    address: cluster.endpoints.join(','),
    // etcd counts leases in whole seconds.
    ttl: 1000,
    restart: async () => {
      await member.kill();
      member.start();
      await cluster.healthy(20_000);
    },
    restartWhat: 'etcd killed and restarted',
  });
});

test('etcd: resign() hands over without waiting for the ttl', async (t) => {
  await resignHandsOver(t, {
    kind: 'etcd',
    makeStore: async () => {
      const client = new Etcd3({ hosts: cluster.endpoints });
      clients.push(client);
      return new EtcdLockStore({ client });
    },
  });
});

test('etcd: a leader that stops renewing is replaced as its lease lapses', async (t) => {
  await lapseHandsOver(t, {
    kind: 'etcd',
    ttl: 1000,
    makeStore: async () => {
      const client = new Etcd3({ hosts: cluster.endpoints });
      clients.push(client);
      return new EtcdLockStore({ client });
    },
  });
});

test('etcd: leader() and watchLeader() follow the leadership', async (t) => {
  await watchFollows(t, {
    kind: 'etcd',
    // The etcd store's subscription serves its own waiters only: a watcher looks again
    // when the leader's lease would run out (or every interval).
    announces: false,
    ttl: 3000,
    makeStore: async () => {
      const client = new Etcd3({ hosts: cluster.endpoints });
      clients.push(client);
      return new EtcdLockStore({ client });
    },
  });
});
