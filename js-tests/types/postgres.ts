// Type test of `leasehold/postgres`: a pg Pool, a Client with a listen client, and the
// mistakes the declarations must reject. Compiled by `tsc -p js-tests/types`.
import { ResiliencePipelineBuilder, type AcquireAnswer, type LockStore } from 'leasehold';
import { PostgresLockStore, type PgLikePool, type PgLikeListenClient, type PgLikeQueryable } from 'leasehold/postgres';

declare const pool: PgLikePool;
declare const client: PgLikeQueryable;
declare const listenClient: PgLikeListenClient;

const store = new PostgresLockStore({ client: pool, table: 'locks', schema: 'app', notify: true });
const single = new PostgresLockStore({ client, listenClient });
const pooled = new PostgresLockStore({ client: pool, transactionPooling: true, listenClient });
void pooled;
// @ts-expect-error transactionPooling is a boolean
new PostgresLockStore({ client: pool, transactionPooling: 'transaction' });
const turns: number = new PostgresLockStore({ client: pool, handOffAfter: 5 }).localHandoff;
new ResiliencePipelineBuilder().addLock({ key: 'k', store, wait: '1s', linger: '5ms' });
const asStore: LockStore = store;
void asStore;
void single;

async function usage(): Promise<void> {
  await store.ensureSchema();
  const lease: AcquireAnswer | undefined = await store.acquire('k', 'owner', 1000);
  const permit: AcquireAnswer | undefined = await store.acquire('k', 'owner', 1000, { limit: 3, weight: 2 });
  const keepsPermits: true = store.permits;
  void [permit, keepsPermits];
  await new ResiliencePipelineBuilder().addLock({ key: 'k', store, limit: 3, weight: 2 }).build().execute(() => 1);
  await new ResiliencePipelineBuilder().addLock({ key: 'k', store, mode: 'shared' }).build().execute(() => 1);
  const renewed: boolean = await store.renew('k', 'owner', 1000);
  const released: boolean = await store.release('k', 'owner');
  const locked: boolean = await store.isLocked('k');
  const left: number | undefined = await store.ttl('k');
  const pruned: number = await store.prune(60_000);
  const stop: () => void = store.subscribe('k', () => {});
  stop();
  const canListen: boolean = store.canSubscribe;
  await store.close();
  void [lease, renewed, released, locked, left, pruned, canListen];
  await new ResiliencePipelineBuilder().addLock({ key: 'k', store, wait: '30s' }).build().execute(() => 1);
}
void usage;

// @ts-expect-error a client is required
new PostgresLockStore({ table: 'locks' });
// @ts-expect-error notify is a boolean
new PostgresLockStore({ client, notify: 'yes' });
// @ts-expect-error a listen client must be able to receive notifications
new PostgresLockStore({ client, listenClient: client });
