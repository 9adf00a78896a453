// The Worker of js-tests/store-kit-durable-object.test.mjs, run by miniflare: the store
// kit's cases, registered with a `test` of its own, each run by one request on a
// DurableObjectLockStore (a stub belongs to the request that made it). The test's entry
// module imports the package's workerd entries and hands them here.
import kit from '../../lib/testing/kit.cjs';

/** The Worker's fetch handler, for the `leasehold` API and store class of the workerd entries. */
export function kitWorker(leasehold, DurableObjectLockStore) {
  function casesFor(env) {
    const cases = [];
    kit.registerKit(
      'DurableObjectLockStore',
      {
        store: () => new DurableObjectLockStore({ namespace: env.LOCKS, prefix: 'kit' }),
        capabilities: { permits: true }, // limit, weight and mode (lib/stores/durable-object/object.mjs)
        leasehold,
        test: (name, fn) => cases.push({ name, fn }),
        describe: (name, fn) => fn(),
      },
      {},
    );
    return cases;
  }
  return {
    async fetch(request, env) {
      const kase = casesFor(env)[Number(new URL(request.url).searchParams.get('case'))];
      let skipped;
      try {
        await kase.fn.call(undefined, { skip: (why) => (skipped = why) });
        return Response.json(skipped ? { skipped } : { passed: true });
      } catch (error) {
        return Response.json({ error: `${error.name}: ${error.message}` });
      }
    },
  };
}
