// Type test of leader election (issue #31): campaign, lead, leader and watchLeader in
// their call forms, and the misuses the types refuse.
import { campaign, lead, leader, watchLeader, MemoryLockStore } from 'leasehold';
import type { Leadership, LeaderInfo, CampaignOptions, LeadOptions } from 'leasehold';
import leasehold from 'leasehold';
import { RedisLockStore } from 'leasehold/redis';

declare const redis: RedisLockStore;

export async function elections(): Promise<void> {
  const store = new MemoryLockStore();
  const controller = new AbortController();
  const options: CampaignOptions = { store, ttl: '10s', name: 'web-1', signal: controller.signal };
  const leadership: Leadership = await campaign('scheduler', options);
  const term: number = leadership.term;
  const name: string | undefined = leadership.name;
  const signal: AbortSignal = leadership.signal;
  const held: boolean = await leadership.resign();
  await campaign('scheduler', { store: redis });
  void [term, name, signal, held];

  const done: Promise<void> = lead(
    'scheduler',
    async ({ term, signal }) => {
      if (!signal.aborted) console.log(term);
    },
    { store, ttl: 5000, signal: controller.signal, onError: (error: unknown, l: Leadership) => console.error(error, l.term) },
  );
  await done;
  const leadOptions: LeadOptions = { store, name: 'x' };
  await leasehold.lead('k', () => undefined, leadOptions);

  const now: LeaderInfo | undefined = await leader(store, 'scheduler');
  if (now) {
    const ttl: number = now.ttl;
    const who: string | undefined = now.name;
    void [ttl, who];
  }
  for await (const change of watchLeader(redis, 'scheduler', { signal: controller.signal, interval: '500ms' })) {
    const owner: string | undefined = change?.owner;
    void owner;
  }
  await leasehold.leader(redis, 'k');

  // @ts-expect-error campaign needs its options, with a store
  await campaign('k');
  // @ts-expect-error a store is required
  await campaign('k', { ttl: 1000 });
  // @ts-expect-error the name is a string
  await campaign('k', { store, name: 1 });
  // @ts-expect-error lead needs a callback
  await lead('k', { store });
  // @ts-expect-error leader() needs a store that can inspect
  await leader({ acquire() {} }, 'k');
}
