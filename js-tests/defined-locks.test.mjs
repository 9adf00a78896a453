// A pipeline with a fixed key defines its lock in the engine once; the definition, and the
// engine's copy of the key, go when the pipeline is collected. 2 rounds of 2,000 pipelines
// with 64 KB keys here; `npm run soak` runs 10,000 a round.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { engine } from './support/leasehold.mjs';
import { runDefinedLockRounds } from './support/defined-locks-check.mjs';

test(`pipelines with 64 KB fixed keys, built and dropped: the engine's memory comes back after gc (${engine})`, () => {
  const { rounds, problems } = runDefinedLockRounds({ engine, rounds: 2, pipelines: 2_000 });
  assert.deepEqual(problems, [], JSON.stringify(rounds));
});
