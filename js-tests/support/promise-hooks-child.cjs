'use strict';
// Child process of js-tests/ambient.test.mjs: uses leasehold as `argv[2]` says, then
// prints one JSON line saying whether promise hooks are on in this process and what the
// locks returned. Promise hooks are process-wide and never turn off again, hence a
// process of its own per case.
//
//   ambient:   one execution with the default ambient token
//   opted-out: every form of use with `ambientToken: false` (pipeline, nested, withLock)
//   import:    leasehold loaded, no lock used
//   probe:     no leasehold; one AsyncLocalStorage#run of this runtime's own

const { AsyncLocalStorage } = require('node:async_hooks');

/**
 * While promise hooks with an init hook are on (how AsyncLocalStorage propagates before
 * AsyncContextFrame), Node tags every new promise with its async id under a symbol.
 */
function promiseHooksOn() {
  return Object.getOwnPropertySymbols(new Promise(() => {})).some((s) => s.description === 'async_id_symbol');
}

async function optedOut(leasehold) {
  const { ResiliencePipelineBuilder, withLock, getLockToken } = leasehold;
  const outer = new ResiliencePipelineBuilder({ ambientToken: false }).addLock({ key: 'outer' }).build();
  const inner = new ResiliencePipelineBuilder({ ambientToken: false }).addLock({ key: 'inner' }).build();
  const seen = await outer.execute(async (context) => {
    await null;
    const nested = await inner.execute(async (innerContext) => {
      await null;
      return { token: getLockToken(innerContext), ambient: getLockToken() };
    });
    return { token: getLockToken(context), ambient: getLockToken(), nested };
  });
  seen.withLock = await withLock('with-lock', async (context) => getLockToken(context), { ambientToken: false });
  return seen;
}

async function main(mode) {
  if (mode === 'probe') {
    new AsyncLocalStorage().run(1, () => {});
    return { hooks: promiseHooksOn() };
  }
  const leasehold = require('leasehold');
  const before = promiseHooksOn();
  let result;
  if (mode === 'ambient') {
    const pipeline = new leasehold.ResiliencePipelineBuilder().addLock({ key: 'ambient' }).build();
    result = await pipeline.execute(async () => {
      await null;
      return leasehold.getLockToken();
    });
  } else if (mode === 'opted-out') {
    result = await optedOut(leasehold);
  } else if (mode !== 'import') {
    throw new Error(`unknown mode ${mode}`);
  }
  return { before, hooks: promiseHooksOn(), engine: leasehold.engine, result };
}

main(process.argv[2]).then(
  (out) => process.stdout.write(`${JSON.stringify(out)}\n`),
  (error) => {
    process.stderr.write(`${error.stack}\n`);
    process.exitCode = 1;
  },
);
