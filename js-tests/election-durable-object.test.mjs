// Leader election (issue #31) through DurableObjectLockStore, in workerd through
// miniflare (js-tests/durable-object/election-worker.mjs): resign() hands over without
// the ttl, a lapsed leader is replaced, leader() names the leader.
//
// workerd runs the wasm engine only: this test runs in the wasm pass of the suite.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startLockWorker, workerdSkip } from './support/workerd.mjs';

const skip = workerdSkip;

let mf;
before(async () => {
  if (skip) return;
  mf = await startLockWorker({ scriptPath: 'js-tests/durable-object/election-worker.mjs' });
});
after(async () => {
  await mf?.dispose();
});

test('Durable Objects: resign() hands over, a lapsed leader is replaced, leader() names the leader', { skip, timeout: 30_000 }, async (t) => {
  const response = await mf.dispatchFetch('http://worker.test/?key=office');
  const text = await response.text();
  assert.equal(response.status, 200, text);
  const seen = JSON.parse(text);
  assert.deepEqual(seen.shown, { name: 'a', term: seen.first.term, owner: seen.first.owner });
  assert.equal(seen.held, true);
  assert.deepEqual([seen.first.aborted, seen.first.reason], [true, 'AbortError']);
  assert.ok(seen.second.term > seen.first.term);
  assert.ok(seen.handoverMs < 5000, `handed over in ${seen.handoverMs} ms, ttl 10 s`);
  assert.ok(seen.next > seen.crashed);
  assert.ok(seen.lapseMs < 10_000);
  assert.equal(seen.after, null);
  t.diagnostic(`durable-object: resign() handed over in ${seen.handoverMs} ms; a 1 s lease left unrenewed: next leader after ${seen.lapseMs} ms`);
});
