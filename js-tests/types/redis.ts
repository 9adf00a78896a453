// Type test of `leasehold/redis` and of a store that grants on release. Compiled by
// `tsc -p js-tests/types`.
import { ResiliencePipelineBuilder, type LockGrant, type LockStore } from 'leasehold';
import { RedisLockStore, type IORedisLikeClient } from 'leasehold/redis';

declare const client: IORedisLikeClient;

const store = new RedisLockStore({ client, prefix: 'jobs', handOffAfter: 0 });
const asStore: LockStore = store;
const grants: boolean = store.grantsOnRelease;
void new ResiliencePipelineBuilder().addLock({ key: 'k', store: asStore, wait: '5s' }).build();

// A store of one's own that queues waiters and hands them released leases.
const handed: LockGrant[] = [];
const granting: LockStore = {
  grantsOnRelease: true,
  async acquire(_key, _owner, _ttlMs, options) {
    return options?.queue ? undefined : { fencingToken: 1 };
  },
  async renew() {
    return true;
  },
  async release() {
    return true;
  },
  subscribe(_key, onReleased) {
    const claimed = onReleased({ owner: 'o', fencingToken: 2, age: 0 });
    if (claimed === true) handed.push({ owner: 'o', fencingToken: 2, age: 0 });
    return () => {};
  },
};

async function main() {
  const queued = await store.acquire('k', 'owner', 1000, { queue: true });
  const token: number | undefined = queued?.fencingToken;
  const permits: true = store.permits;
  const answer = await store.acquire('k', 'owner', 1000, { queue: true, limit: 3, weight: 2 });
  const heldWith: number | undefined = answer?.limit;
  const inspected = await store.inspect('k');
  const weight: number | undefined = inspected?.holders[0]?.weight;
  const mode: 'shared' | 'exclusive' | undefined = inspected?.holders[0]?.mode;
  const limit: number | undefined = inspected?.limit;
  // @ts-expect-error a limit is a number
  await store.acquire('k', 'owner', 1000, { limit: '3', weight: 1 });
  void [permits, heldWith, weight, mode, limit];
  // @ts-expect-error handOffAfter is milliseconds, not a duration string
  new RedisLockStore({ client, handOffAfter: '20ms' });
  new RedisLockStore({ client, minReplicas: 1, replicaTimeout: 500 });
  // @ts-expect-error replicaTimeout is milliseconds, not a duration string
  new RedisLockStore({ client, minReplicas: 1, replicaTimeout: '1s' });
  // @ts-expect-error a grant's token is a number
  const bad: LockGrant = { owner: 'o', fencingToken: '2', age: 0 };
  void [token, bad, grants, granting];
}
void main;
