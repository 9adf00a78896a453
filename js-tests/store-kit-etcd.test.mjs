// The store kit (`leasehold/testing`) on EtcdLockStore against a real etcd (one member).
// etcd leases count whole seconds: the kit's short leases last one. Runs once per engine.
import { after, before } from 'node:test';
import { Etcd3 } from 'etcd3';
import { EtcdLockStore } from 'leasehold/etcd';
import { testLockStore } from 'leasehold/testing';
import { startEtcdCluster } from './support/etcd.mjs';

let etcd;
before(async () => {
  etcd = await startEtcdCluster(1);
});
after(() => etcd?.stop());

const clients = new WeakMap(); // store -> its client: closing a store leaves its client open

testLockStore('EtcdLockStore', {
  store: () => {
    const client = new Etcd3({ hosts: etcd.endpoints });
    const store = new EtcdLockStore({ client });
    clients.set(store, client);
    return store;
  },
  close: async (store) => {
    await store.close();
    clients.get(store).close();
  },
  shortTtl: 1000,
  capabilities: { permits: true }, // limit, weight and mode: the kit's permit cases run
});
