// Type test for `leasehold/tabs`: compiled with `tsc --noEmit` (npm test), never run.
import { ResiliencePipelineBuilder, acquireLock, type LockStore } from 'leasehold';
import { TabLockStore } from 'leasehold/tabs';

const store = new TabLockStore({ prefix: 'app', database: 'app-locks' });
const asStore: LockStore = store;
void asStore;
const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'sync', ttl: '30s', wait: '1m', store }).build();

export async function tabs(): Promise<void> {
  await pipeline.execute(async ({ signal }) => signal.aborted);
  const lease = await acquireLock(store, 'sync', '10s');
  if (lease) await lease.release();
  const locked: boolean = await store.isLocked('sync');
  void locked;
  const permits: true = store.permits;
  void permits;
  await new ResiliencePipelineBuilder().addLock({ key: 'sync', store, mode: 'shared' }).build().execute(() => 1);
  await new ResiliencePipelineBuilder().addLock({ key: 'sync', store, limit: 3, weight: 2 }).build().execute(() => 1);
  await store.close();
  // @ts-expect-error no such option
  new TabLockStore({ prefx: 'app' });
}
