// What every bundled page runs (js-tests/bundlers.test.mjs): a pipeline built at module
// load, five executions that must take turns with increasing fencing tokens, and a
// fail-fast try while the key is held. Resolves to what the test checks.
import { ResiliencePipelineBuilder, LockNotAcquiredError, getLockToken, engine } from 'leasehold';

const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'bundled', ttl: '10s', wait: '10s' }).build();

export async function run() {
  let inside = 0;
  let maxInside = 0;
  const tokens = [];
  let failFast;
  await Promise.all(
    [1, 2, 3, 4, 5].map(() =>
      pipeline.execute(async (context) => {
        inside += 1;
        maxInside = Math.max(maxInside, inside);
        tokens.push(getLockToken(context));
        if (failFast === undefined) {
          failFast = await new ResiliencePipelineBuilder()
            .addLock({ key: 'bundled' })
            .build()
            .execute(() => 'ran while held')
            .catch((error) => (error instanceof LockNotAcquiredError ? error.code : String(error)));
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
        inside -= 1;
      }),
    ),
  );
  const wasm = performance
    .getEntriesByType('resource')
    .map((entry) => new URL(entry.name).pathname)
    .filter((path) => path.endsWith('.wasm'));
  return { engine, maxInside, tokens, failFast, wasm };
}

export function report(promise) {
  promise.then(
    (result) => (window.bundleResult = result),
    (error) => (window.bundleResult = { error: String(error?.stack ?? error) }),
  );
}
