// The Worker of js-tests/election-durable-object.test.mjs, run by miniflare: leader
// election through DurableObjectLockStore inside workerd. One request runs the whole
// scenario and reports what it saw.
import { acquireLock, campaign, leader } from '../../lib/entries/workerd.mjs';
import { DurableObjectLockStore, LockDurableObject } from '../../lib/stores/durable-object/index.mjs';

export { LockDurableObject };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Two candidates through two stores: the first leads, resigns, the second leads; then a
 * lease left unrenewed (a crashed leader) and a candidate that takes over at its lapse.
 */
async function election(env, key) {
  const [a, b, observer] = [0, 1, 2].map(() => new DurableObjectLockStore({ namespace: env.LOCKS }));
  const first = await campaign(key, { store: a, ttl: 10_000, name: 'a' });
  const shown = await leader(observer, key);
  const secondP = campaign(key, { store: b, ttl: 10_000, name: 'b' });
  await sleep(200);
  const resignedAt = Date.now();
  const held = await first.resign();
  const second = await secondP;
  const handoverMs = Date.now() - resignedAt;
  await second.resign();

  const lapseKey = `${key}-lapse`;
  const crashed = await acquireLock(a, lapseKey, 1000);
  const crashedAt = Date.now();
  const next = await campaign(lapseKey, { store: b, ttl: 1000, name: 'next' });
  const lapseMs = Date.now() - crashedAt;
  await next.resign();
  return {
    shown: shown && { name: shown.name, term: shown.term, owner: shown.owner },
    first: { term: first.term, owner: first.owner, aborted: first.signal.aborted, reason: first.signal.reason?.name },
    held,
    second: { term: second.term },
    handoverMs,
    crashed: crashed.fencingToken,
    next: next.term,
    lapseMs,
    after: (await leader(observer, key)) ?? null,
  };
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    try {
      return Response.json(await election(env, url.searchParams.get('key')));
    } catch (error) {
      return new Response(`${error?.name}: ${error?.message}\n${error?.stack}`, { status: 500 });
    }
  },
};
