// One deployer. Several start at once; each waits its turn for the lock on
// `deploy:production` in etcd (served in the order they asked, across processes), then
// records its release under the lock with a write that etcd itself fences: the write
// goes through only while the stored fence is lower than this holder's token.
//
//   ETCD_ENDPOINTS=127.0.0.1:2379 node deploy.mjs <name>

import { Etcd3 } from 'etcd3';
import { ResiliencePipelineBuilder, getLockToken } from 'leasehold';
import { EtcdLockStore } from 'leasehold/etcd';

const name = process.argv[2] ?? `deployer-${process.pid}`;
const client = new Etcd3({ hosts: (process.env.ETCD_ENDPOINTS ?? '127.0.0.1:2379').split(',') });
const store = new EtcdLockStore({ client });
const deploys = new ResiliencePipelineBuilder()
  .addLock({ key: 'deploy:production', store, ttl: '10s', wait: '1m' })
  .build();

// Zero-padded, so that etcd's byte order of the values is their numeric order.
const pad = (n) => String(n).padStart(20, '0');

/** Appends to the deploy log only while `token` is above every token the log has seen. */
async function fencedAppend(token, line) {
  // The fence starts at zero, created once by whoever comes first.
  await client.if('deploy-log/fence', 'Create', '==', 0).then(client.put('deploy-log/fence').value(pad(0))).commit();
  // Compared and written in one transaction: no other write can come in between.
  const result = await client
    .if('deploy-log/fence', 'Value', '<', pad(token))
    .then(client.put('deploy-log/fence').value(pad(token)), client.put(`deploy-log/entries/${pad(token)}`).value(line))
    .commit();
  return result.succeeded;
}

try {
  await deploys.execute(async ({ signal }) => {
    const token = getLockToken();
    console.log(`${name}: deploying with fencing token ${token}`);
    await new Promise((resolve) => setTimeout(resolve, 200)); // the deploy itself
    signal.throwIfAborted();
    const accepted = await fencedAppend(token, `${name} deployed`);
    console.log(`${name}: done, log write ${accepted ? 'accepted' : 'REFUSED (stale token)'}`);
  });
} finally {
  await store.close();
  client.close();
}
