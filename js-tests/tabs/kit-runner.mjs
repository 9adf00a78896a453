// What the page of js-tests/store-kit-tabs.test.mjs runs: the store kit's cases on a
// TabLockStore, registered with a `test` of its own (the kit, bundled for the browser by
// the test's server, is /kit.mjs; the package's browser entries are /leasehold.mjs and
// /leasehold-tabs.mjs).
import * as leasehold from '/leasehold.mjs';
import { TabLockStore } from '/leasehold-tabs.mjs';
import kit from '/kit.mjs';

const cases = [];
kit.registerKit(
  'TabLockStore',
  {
    store: () => new TabLockStore({ prefix: 'kit' }),
    capabilities: { permits: true }, // modes as Web Lock modes, limit as permit locks (lib/stores/tabs/)
    close: (store) => store.close(),
    leasehold,
    test: (name, fn) => cases.push({ name, fn }),
    describe: (name, fn) => fn(),
  },
  {},
);

/** Runs case `i`: { passed }, { skipped: why } or { error: message }. */
export async function run(i) {
  let skipped;
  try {
    await cases[i].fn.call(undefined, { skip: (why) => (skipped = why) });
    return skipped ? { skipped } : { passed: true };
  } catch (error) {
    return { error: `${error.name}: ${error.message}` };
  }
}
