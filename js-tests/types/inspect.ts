// Type test of inspection: `inspect` and `list` on every store that has them, and the
// shapes they answer with. Compiled by `tsc -p js-tests/types`.
import { MemoryLockStore, type InspectableStore, type LockInspection, type LockStore } from 'leasehold';
import { RedisLockStore, type IORedisLikeClient } from 'leasehold/redis';
import { PostgresLockStore, type PgLikePool } from 'leasehold/postgres';
import { EtcdLockStore } from 'leasehold/etcd';

declare const redisClient: IORedisLikeClient;
declare const pool: PgLikePool;
declare const etcdClient: ConstructorParameters<typeof EtcdLockStore>[0]['client'];

const stores: InspectableStore[] = [
  new MemoryLockStore(),
  new RedisLockStore({ client: redisClient }),
  new PostgresLockStore({ client: pool }),
  new EtcdLockStore({ client: etcdClient }),
];

async function show(store: InspectableStore): Promise<string[]> {
  const lines: string[] = [];
  for await (const key of store.list({ prefix: 'jobs/', limit: 100 })) {
    const seen: LockInspection | undefined = await store.inspect(key);
    if (seen === undefined) continue;
    const [holder] = seen.holders;
    const left: number = holder.ttl;
    const token: number = holder.fencingToken;
    const since: number | undefined = seen.waiters[0]?.since;
    lines.push(`${seen.key} ${holder.owner} ${token} ${left} ${seen.waiters.length} ${since ?? ''}`);
  }
  // @ts-expect-error limit is a number
  store.list({ limit: '10' });
  // @ts-expect-error inspect takes a key
  void store.inspect();
  return lines;
}

// A store of one's own may answer them too.
const custom: LockStore = {
  acquire: async () => ({ fencingToken: 1 }),
  renew: async () => true,
  release: async () => {},
  inspect: async (key) => ({ key, holders: [{ owner: 'o', fencingToken: 1, ttl: 10 }], waiters: [{ owner: 'w' }] }),
  async *list() {
    yield 'k';
  },
};
void stores.map(show);
void custom;
