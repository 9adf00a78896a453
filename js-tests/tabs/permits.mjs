// What a page of js-tests/tabs-permits.test.mjs does: calls a TabLockStore directly with
// permits (store level), and keeps the grants its listeners are handed.
import { TabLockStore } from '/lib/stores/tabs/index.mjs';

const SHARED_LIMIT = 2147483647;
const store = new TabLockStore({ prefix: 'tabs-permits' });
const PERMITS = {
  plain: undefined,
  read: { limit: SHARED_LIMIT, weight: 1 },
  write: { limit: SHARED_LIMIT, weight: SHARED_LIMIT },
};
/** Grants handed to this page's queued owners, per key: claimed as they come. */
const grants = new Map();

/** The answer of a try: its token, 'none' for undefined, or `{ limit }`; an error as 'Name: message'. */
export async function acquire({ key, owner, as = 'plain', options, ttl = 10_000, queue = false }) {
  if (!grants.has(key)) {
    grants.set(key, []);
    store.subscribe(key, (grant) => {
      grants.get(key).push({ owner: grant.owner, fencingToken: grant.fencingToken });
      return true;
    });
  }
  const asked = options ?? (queue ? { ...PERMITS[as], queue } : PERMITS[as]);
  try {
    const answer = await store.acquire(key, owner, ttl, asked);
    return answer === undefined ? 'none' : (answer.fencingToken ?? answer);
  } catch (error) {
    return `${error.name}: ${error.message}`;
  }
}

export const release = ({ key, owner }) => store.release(key, owner);
export const renew = ({ key, owner, ttl = 10_000 }) => store.renew(key, owner, ttl);
export const grantsOf = (key) => grants.get(key) ?? [];
export const inspect = async (key) => (await store.inspect(key)) ?? null;
export const permits = () => store.permits;
export const modes = async () => (await navigator.locks.query()).held.map((lock) => lock.mode).sort();
