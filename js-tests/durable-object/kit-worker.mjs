// The Worker of js-tests/store-kit-durable-object.test.mjs, run by miniflare: the store
// kit's cases, registered with a `test` of its own, each run by one request on a
// DurableObjectLockStore (a stub belongs to the request that made it).
import * as leasehold from '../../lib/workerd.mjs';
import { DurableObjectLockStore, LockDurableObject } from '../../lib/durable-object.mjs';
import kit from '../../lib/testing/kit.cjs';

export { LockDurableObject };

function casesFor(env) {
  const cases = [];
  kit.registerKit(
    'DurableObjectLockStore',
    {
      store: () => new DurableObjectLockStore({ namespace: env.LOCKS, prefix: 'kit' }),
      leasehold,
      test: (name, fn) => cases.push({ name, fn }),
      describe: (name, fn) => fn(),
    },
    {},
  );
  return cases;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const cases = casesFor(env);
    if (url.pathname === '/cases') return Response.json(cases.map((c) => c.name));
    const kase = cases[Number(url.searchParams.get('case'))];
    let skipped;
    try {
      await kase.fn.call(undefined, { skip: (why) => (skipped = why) });
      return Response.json(skipped ? { skipped } : { passed: true });
    } catch (error) {
      return Response.json({ error: `${error.name}: ${error.message}` });
    }
  },
};
