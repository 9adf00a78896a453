// Runs the contract model (world.mjs) from the command line: the soak's long run, and
// the child whose exit js-tests/contract-model.test.mjs times.
//   node js-tests/model/main.mjs --clock fake|real [--seed N] [--runs N] [--ms N]
// Prints the seed; on a failure, the (shrunk) plan, what broke, and exits 1.
import { parseArgs } from 'node:util';
import { explore } from './explore.mjs';

const { values } = parseArgs({
  options: { clock: { type: 'string', default: 'fake' }, seed: { type: 'string' }, runs: { type: 'string' }, ms: { type: 'string' } },
});
const seed = values.seed !== undefined ? Number(values.seed) : Number(process.env.LEASEHOLD_MODEL_SEED ?? Date.now() % 2 ** 31);
const outcome = await explore(values.clock, { seed, runs: Number(values.runs ?? 1_000_000), ms: Number(values.ms ?? 5_000) });
if (outcome.failure) {
  console.error(outcome.failure);
  process.exitCode = 1;
} else {
  console.log(`done: ${outcome.runs} runs, ${outcome.requests} requests, clock ${values.clock}, seed ${seed}`);
}
