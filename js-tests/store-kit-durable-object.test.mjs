// The store kit (`leasehold/testing`) on DurableObjectLockStore in workerd, through
// miniflare: js-tests/durable-object/kit-worker.mjs runs each case in one request, with
// the kit's `test` injected. workerd runs the wasm engine only: the wasm pass runs these.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import kit from '../lib/testing/kit.cjs';
import { root, startLockWorker, workerdSkip } from './support/workerd.mjs';

const skip = workerdSkip;

// The Worker's entry: the package's workerd entries, found through its exports.
const { exports } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const entry = `
import * as leasehold from '${exports['.'].workerd}';
import { DurableObjectLockStore, LockDurableObject } from '${exports['./durable-object'].default}';
import { kitWorker } from './js-tests/durable-object/kit-worker.mjs';
export { LockDurableObject };
export default kitWorker(leasehold, DurableObjectLockStore);
`;

let mf;
if (!skip) {
  mf = await startLockWorker({ script: entry, scriptPath: 'kit-entry.mjs', commonJs: true });
}
after(() => mf?.dispose());

async function get(pathAndQuery) {
  const response = await mf.dispatchFetch(`http://worker.test${pathAndQuery}`);
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text);
}

// Found by the kit, not fixed here: the host's one timer, armed while serving an earlier
// request, never fires in a later one (workerd drops an ended request's timers), and the
// engine, taking it for armed, asks for no other: a lease is then not renewed until the
// next call into the engine, and is lost. One request in two fails this case.
const KNOWN = {
  'through the engine: a lease renewed every ttl/3 outlives its ttl':
    "workerd: a host timer armed in an earlier request never fires, so renewals stop (EngineHost#arm)",
};

for (const [i, { name }] of kit.CASES.entries()) {
  test(`DurableObjectLockStore: ${name}`, { skip, timeout: 60_000, todo: KNOWN[name] }, async (t) => {
    const outcome = await get(`/run?case=${i}`);
    if (outcome.skipped) return t.skip(outcome.skipped);
    assert.ok(outcome.passed, outcome.error);
  });
}
