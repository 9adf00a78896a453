// Explores random plans (plan.mjs) through the world (world.mjs) with fast-check, from
// one seed, for a number of runs or a time budget; a failure comes back shrunk, as
// text that names the seed, the plan step by step and what broke.
import fc from 'fast-check';
import { describePlan, planOf } from './plan.mjs';
import { runPlan } from './world.mjs';

export async function explore(clock, { seed, runs, ms, maxSteps = 40 }) {
  let count = 0;
  let requests = 0;
  const rejections = [];
  const onRejection = (reason) => rejections.push(reason);
  process.on('unhandledRejection', onRejection);
  try {
    const property = fc.asyncProperty(planOf(clock, { maxSteps }), async (plan) => {
      count += 1;
      rejections.length = 0;
      requests += await runPlan(plan);
      await new Promise((resolve) => setImmediate(resolve));
      if (rejections.length > 0) throw new Error(`unhandled rejection: ${rejections.splice(0).map(String).join('; ')}`);
    });
    const details = await fc.check(property, {
      seed,
      numRuns: runs,
      interruptAfterTimeLimit: ms,
      markInterruptAsFailure: false,
      // Real time makes a run differ from one try to the next: shrink a little only.
      maxSkipsPerRun: 0,
      ...(clock === 'real' ? { endOnFailure: true } : {}),
    });
    if (!details.failed) return { runs: count, requests };
    const plan = details.counterexample?.[0];
    const failure = [
      `contract model failed: clock ${clock}, seed ${seed} (LEASEHOLD_MODEL_SEED=${seed}), path ${details.counterexamplePath}`,
      `what broke: ${details.errorInstance?.message ?? details.error}`,
      plan ? `the plan (shrunk ${details.numShrinks} times):\n${describePlan(plan)}` : '',
    ].join('\n');
    return { runs: count, requests, failure };
  } finally {
    process.off('unhandledRejection', onRejection);
  }
}
