// A one-lock pipeline on a JS store whose key comes per execution (`operationKey`)
// defines the last key used twice in a row in the engine, and starts its executions by
// id (ResiliencePipeline#keyedLock): every store call must still carry its execution's
// own key, owner and token, and the engine must hold at most that one definition.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import api from 'leasehold';

const { ResiliencePipelineBuilder, getLockToken, engine } = api;
const host = api[Symbol.for('leasehold.internals')].hostOf(undefined);

/** A store of one's own (README, "A store of your own"), in process, recording its calls. */
function recordingStore() {
  const held = new Map();
  let next = 100;
  const calls = [];
  return {
    calls,
    async acquire(key, owner) {
      calls.push(['acquire', key, owner]);
      if (held.has(key)) return undefined;
      const fencingToken = next++;
      held.set(key, { owner, fencingToken });
      return { fencingToken };
    },
    async renew(key, owner) {
      return held.get(key)?.owner === owner;
    },
    async release(key, owner) {
      calls.push(['release', key, owner]);
      if (held.get(key)?.owner !== owner) return false;
      held.delete(key);
      return true;
    },
  };
}

test(`keys in a row: each execution runs under its own key's lease and token; one definition at a time (${engine})`, async () => {
  const store = recordingStore();
  const pipeline = new ResiliencePipelineBuilder().addLock({ store, ttl: 10_000, wait: 0 }).build();
  const base = host.engine.definedLocks();
  const keys = ['a', 'a', 'a', 'b', 'a', 'b', 'b', 'b', 'a'];
  // After each execution: whether the key was used just before (so now defined).
  const defined = [0, 1, 1, 0, 0, 0, 1, 1, 0];
  for (let i = 0; i < keys.length; i++) {
    const before = store.calls.length;
    const token = await pipeline.execute(() => getLockToken(), { operationKey: keys[i] });
    const [acquire, release] = store.calls.slice(before);
    assert.deepEqual([acquire[0], acquire[1], release[0], release[1]], ['acquire', keys[i], 'release', keys[i]], `execution ${i}`);
    assert.equal(release[2], acquire[2], `execution ${i}: released by its owner`);
    assert.equal(token, 100 + i, `execution ${i}: runs under its store's token`);
    assert.equal(host.engine.definedLocks() - base, defined[i], `execution ${i}: definitions held`);
  }
});

test(`an execution in flight keeps its key when the next key replaces the definition (${engine})`, async () => {
  const store = recordingStore();
  const pipeline = new ResiliencePipelineBuilder().addLock({ store, ttl: 10_000, wait: 0 }).build();
  await pipeline.execute(() => 0, { operationKey: 'x' });
  let letGo;
  const gate = new Promise((resolve) => {
    letGo = resolve;
  });
  // Started on the definition of 'x' (its second use in a row), held while 'y' comes.
  const holding = pipeline.execute(async () => {
    await gate;
    return getLockToken();
  }, { operationKey: 'x' });
  assert.equal(await pipeline.execute(() => getLockToken(), { operationKey: 'y' }), 102);
  assert.equal(await pipeline.execute(() => getLockToken(), { operationKey: 'y' }), 103);
  letGo();
  assert.equal(await holding, 101);
  const releases = store.calls.filter(([method]) => method === 'release').map(([, key]) => key);
  assert.deepEqual(releases, ['x', 'y', 'y', 'x']);
  // A key the engine refuses is refused as before, defined or not.
  for (let i = 0; i < 2; i++) {
    await assert.rejects(pipeline.execute(() => 0, { operationKey: '' }), TypeError);
  }
});
