// Type test for `leasehold/durable-object`: compiled with `tsc --noEmit` (npm test), never run.
import { ResiliencePipelineBuilder, type LockStore } from 'leasehold';
import { DurableObjectLockStore, LockDurableObject } from 'leasehold/durable-object';

export { LockDurableObject };

interface Env {
  LOCKS: { idFromName(name: string): unknown; get(id: unknown): unknown };
}

export async function handle(env: Env): Promise<number | undefined> {
  const store: LockStore = new DurableObjectLockStore({ namespace: env.LOCKS, prefix: 'app' });
  const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'job', store, wait: '10s' }).build();
  // @ts-expect-error the namespace is required
  new DurableObjectLockStore({});
  const seen = await new DurableObjectLockStore({ namespace: env.LOCKS }).inspect('job');
  const owner: string | undefined = seen?.holders[0]?.owner;
  void owner;
  const permitted: true = new DurableObjectLockStore({ namespace: env.LOCKS }).permits;
  void permitted;
  const readers = new ResiliencePipelineBuilder().addLock({ key: 'report', store, mode: 'shared', wait: '10s' }).build();
  const limited = new ResiliencePipelineBuilder().addLock({ key: 'api', store, limit: 5, weight: 2, wait: '10s' }).build();
  void readers;
  void limited;
  return pipeline.execute((context) => context.properties.size);
}
