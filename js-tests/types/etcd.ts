// Type test of `leasehold/etcd`: an Etcd3 client and a namespace of one are accepted as
// they are, and the mistakes the declarations must reject. Compiled by `tsc -p js-tests/types`.
import { Etcd3 } from 'etcd3';
import { ResiliencePipelineBuilder, type AcquireAnswer, type LockStore } from 'leasehold';
import { EtcdLockStore, type EtcdLockGrant } from 'leasehold/etcd';

const client = new Etcd3({ hosts: '127.0.0.1:2379' });
const store = new EtcdLockStore({ client });
const inNamespace = new EtcdLockStore({ client: client.namespace('app/'), prefix: 'locks' });
const asStore: LockStore = store;
void asStore;
void inNamespace;

async function usage(): Promise<void> {
  const lease: AcquireAnswer | undefined = await store.acquire('k', 'owner', 1000, { queue: true });
  const permit: AcquireAnswer | undefined = await store.acquire('k', 'owner', 1000, { queue: true, limit: 3, weight: 2 });
  const limit: number | undefined = permit?.limit;
  const permits: true = store.permits;
  void [limit, permits];
  await new ResiliencePipelineBuilder().addLock({ key: 'k', store, limit: 3, weight: 2 }).build().execute(() => 1);
  const renewed: boolean = await store.renew('k', 'owner', 1000);
  const released: boolean = await store.release('k', 'owner');
  const locked: boolean = await store.isLocked('k');
  const left: number | undefined = await store.ttl('k');
  const stop: () => void = store.subscribe('k', (grant: EtcdLockGrant) => grant.fencingToken > 0);
  stop();
  const prefix: string = store.prefix;
  const grants: true = store.grantsOnRelease;
  await store.close();
  void [lease, renewed, released, locked, left, prefix, grants];
  await new ResiliencePipelineBuilder().addLock({ key: 'k', store, wait: '30s' }).build().execute(() => 1);
}
void usage;

// @ts-expect-error a client is required
new EtcdLockStore({ prefix: 'locks' });
// @ts-expect-error limit is a number
void store.acquire('k', 'owner', 1000, { limit: '3', weight: 1 });
// @ts-expect-error the prefix is a string
new EtcdLockStore({ client, prefix: 42 });
// @ts-expect-error not an etcd client
new EtcdLockStore({ client: { query: () => undefined } });
