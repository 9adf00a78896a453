// Leader election (issue #31) through DurableObjectLockStore, in workerd through
// miniflare (js-tests/durable-object/election-worker.mjs): resign() hands over without
// the ttl, a lapsed leader is replaced, leader() names the leader.
//
// workerd runs the wasm engine only: this test runs in the wasm pass of the suite.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
let Miniflare;
try {
  ({ Miniflare } = await import('miniflare'));
} catch {
  Miniflare = undefined;
}
const skip =
  process.env.LEASEHOLD_ENGINE === 'native'
    ? 'workerd runs the wasm engine only: this test runs in the wasm pass'
    : !Miniflare
      ? 'miniflare is not installed'
      : !existsSync(path.join(root, 'dist/wasm/leasehold_wasm_bg.wasm'))
        ? 'the wasm engine is not built (npm run build)'
        : false;

let mf;
before(async () => {
  if (skip) return;
  mf = new Miniflare({
    modules: true,
    scriptPath: path.join(root, 'js-tests/durable-object/election-worker.mjs'),
    modulesRoot: root,
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: '2025-09-01',
    compatibilityFlags: ['nodejs_compat'],
    durableObjects: { LOCKS: 'LockDurableObject' },
  });
  await mf.ready;
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
