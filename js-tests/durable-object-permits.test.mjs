// Permits on DurableObjectLockStore and LockDurableObject, store level, in workerd through
// miniflare: js-tests/durable-object/permits-worker.mjs runs each scenario in one request
// and reports what the store answered. workerd runs the wasm engine only: the wasm pass
// runs these.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startLockWorker, workerdSkip } from './support/workerd.mjs';

const skip = workerdSkip;
const SHARED_LIMIT = 2147483647;
const opts = { skip, timeout: 30_000 };

let mf;
before(async () => {
  if (skip) return;
  mf = await startLockWorker({ scriptPath: 'js-tests/durable-object/permits-worker.mjs' });
});
after(async () => {
  await mf?.dispose();
});

async function run(scenario, key = scenario) {
  const response = await mf.dispatchFetch(`http://worker.test/${scenario}?key=${key}`);
  const text = await response.text();
  assert.equal(response.status, 200, text);
  const report = JSON.parse(text);
  assert.equal(report.error, undefined, report.error);
  return report;
}

function assertRising(tokens, what) {
  for (const t of tokens) assert.ok(Number.isSafeInteger(t), `${what}: ${tokens.join(', ')}`);
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${what}: ${tokens.join(', ')}`);
}

test('limit 5: weights are summed, and a release makes room for what fits', opts, async () => {
  const r = await run('weights');
  assert.equal(r.c, 'none', 'weights 2 + 3 fill limit 5');
  assert.equal(r.released, true);
  assert.equal(r.d, 'none', '3 + 1 + 2 > 5');
  assertRising([r.a, r.b, r.c2, r.e], 'tokens in grant order');
  assert.equal(r.seenFull.limit, 5);
  assert.deepEqual(r.seenFull.holders.map((h) => [h.owner, h.fencingToken, h.weight, h.mode]), [
    ['a', r.a, 2, undefined],
    ['b', r.b, 3, undefined],
  ]);
});

test('readers together, a writer alone, and no reader overtakes a waiting writer', opts, async () => {
  const r = await run('modes');
  assertRising(r.readers, 'readers');
  assert.equal(r.writer, 'none', 'the writer waits for the readers');
  assert.equal(r.lateReader, 'none', 'a reader behind a waiting writer waits');
  assert.equal(r.lateTry, 'none', 'a reader trying once behind a waiting writer is refused');
  assert.equal(r.beforeLast, 0, 'the writer waits until the last reader is gone');
  assert.deepEqual(r.grants.map((g) => g.owner), ['w', 'r4']);
  assertRising([...r.readers, ...r.grants.map((g) => g.fencingToken)], 'tokens across modes');
  assert.equal(r.readerWhileWriting, 'none');
  assert.equal(r.seenReading.limit, SHARED_LIMIT);
  assert.deepEqual(r.seenReading.holders.map((h) => [h.owner, h.weight, h.mode]), [
    ['r1', 1, 'shared'],
    ['r2', 1, 'shared'],
    ['r3', 1, 'shared'],
  ]);
  assert.deepEqual(r.seenReading.waiters.map((w) => w.owner), ['w', 'r4']);
  assert.deepEqual(r.seenWriting.holders.map((h) => [h.owner, h.weight, h.mode]), [['w', SHARED_LIMIT, 'exclusive']]);
  assert.deepEqual(r.seenAfter.holders.map((h) => [h.owner, h.mode]), [['r4', 'shared']]);
});

test('FIFO: a heavy request at the head is not overtaken; then the head is granted while each fits', opts, async () => {
  const r = await run('fifo');
  assert.equal(r.heavy, 'none');
  assert.equal(r.light1, 'none', 'a light request behind the heavy one waits though a permit is free');
  assert.equal(r.light2, 'none');
  assert.equal(r.lightTry, 'none');
  assert.equal(r.queuedBefore, 3);
  assert.equal(r.queuedWhileHeavy, 2);
  // The two lights are handed permits at once: their answers may come back in either order.
  const byToken = [...r.grants].sort((x, y) => x.fencingToken - y.fencingToken);
  assert.deepEqual(byToken.map((g) => g.owner), ['heavy', 'light1', 'light2'], 'granted in queue order');
  assertRising([r.a, ...byToken.map((g) => g.fencingToken)], 'tokens');
  assert.deepEqual(r.seen.holders.map((h) => [h.owner, h.weight]), [['light1', 1], ['light2', 1]]);
  assert.equal(r.seen.limit, 3);
});

test('one limit per key: plain vs permits and limit 3 vs 4 are answered { limit }, both ways', opts, async () => {
  const r = await run('agreement');
  assert.equal(typeof r.plain, 'number');
  assert.deepEqual(r.permitsOnPlain, { limit: 1 }, 'permits on a plain lease');
  assert.deepEqual(r.readOnPlain, { limit: 1 }, 'a reader on a plain lease');
  assert.deepEqual(r.plainOnPermits, { limit: 3 }, 'a plain lock on permits');
  assert.deepEqual(r.plainQueued, { limit: 3 }, 'refused, not queued');
  assert.deepEqual(r.otherLimit, { limit: 3 }, 'limit 4 on a key of limit 3');
  assert.ok(r.sameLimit > r.held);
  assert.equal(r.queuedAfter, 0, 'no refused try was queued');
  assert.deepEqual(r.whileHanded, { limit: 3 }, 'the limit holds while permits are handed on');
  assert.equal(typeof r.afterwards, 'number', 'an idle key takes a new limit');
  assert.equal(typeof r.plainAfterwards, 'number', 'and so does a plain key once released');
});

test('renew and release act on one owner; a queued owner released leaves the queue', opts, async () => {
  const r = await run('perOwner');
  assert.equal(r.queued, 'none');
  assert.deepEqual([r.queuedBefore, r.releasedQueued, r.queuedAfter], [1, false, 0]);
  assert.equal(r.renewA, true);
  const [a, b] = r.seen.holders;
  assert.ok(a.ttl > 10_000 && a.ttl <= 20_000, `a renewed: ${a.ttl}`);
  assert.ok(b.ttl <= 10_000, `b untouched: ${b.ttl}`);
  assert.deepEqual(
    [r.releaseA, r.renewAAgain, r.releaseAAgain, r.renewB, r.renewStranger, r.again, r.releaseB, r.locked],
    [true, false, false, true, false, 'none', true, false],
  );
});

test("a lapsed holder's permits pass to the head of the queue; the others keep theirs", opts, async () => {
  const r = await run('lapse');
  assert.equal(r.next, 'none');
  assert.equal(r.granted.owner, 'next');
  assertRising([r.short, r.long, r.granted.fencingToken], 'tokens');
  assert.ok(r.waited < 9_000, `handed on by the object's timer, after ${r.waited} ms`);
  assert.equal(r.renewShort, false, 'the lapsed holder cannot renew');
  assert.equal(r.renewLong, true);
  assert.deepEqual(r.seen.holders.map((h) => [h.owner, h.weight]), [['long', 1], ['next', 2]]);
});

test('bad options are refused by the store and the object, naming the field', opts, async () => {
  const r = await run('refusals');
  assert.equal(r.permits, true);
  assert.match(r.zeroLimit, /^RangeError: options\.limit must be an integer from 1 to 2147483647, got 0/);
  assert.match(r.noWeight, /^RangeError: options\.weight must be an integer from 1 to the limit \(3\), got undefined/);
  assert.match(r.tooHeavy, /^RangeError: options\.weight .* got 4/);
  assert.match(r.fraction, /^RangeError: options\.limit .* got 2\.5/);
  assert.match(r.overShared, /^RangeError: options\.limit .* got 2147483648/);
  assert.match(r.badQueue, /^TypeError: options must be an object like \{ queue: true \}/);
  assert.match(r.objectTooHeavy, /^RangeError: options\.weight .* got 3/);
  assert.ok(Number.isSafeInteger(r.objectEarlierStore.fencingToken), 'a plain try of an earlier store is still served');
  assert.equal(r.untouched, null, 'nothing was taken or queued');
});

// Engine level: pipelines with `limit`, one request per execution.

async function get(pathAndQuery) {
  const response = await mf.dispatchFetch(`http://worker.test${pathAndQuery}`);
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text);
}

test('pipelines with limit 3 and weights 1 and 2: never more than 3 inside, several at once, tokens fenced', opts, async () => {
  const key = 'pipelines';
  const weights = [2, 1, 2, 1, 1, 2, 1, 2];
  const results = await Promise.all(weights.map((w, i) => get(`/run?key=${key}&limit=3&weight=${w}&hold=150&name=r${i}`)));
  for (const r of results) assert.ok(Number.isSafeInteger(r.token), JSON.stringify(r));
  const seen = await get(`/seen?key=${key}`);
  assert.equal(seen.grants.length, weights.length);
  assert.ok(seen.most <= 3, `at most 3 permits inside, saw ${seen.most}`);
  assert.ok(seen.most >= 2, `several holders at once, saw ${seen.most}`);
  assert.equal(seen.inside, 0);
  assert.equal(new Set(seen.grants.map((g) => g.token)).size, weights.length, 'a token per grant');
  // Whoever went in after another came out has a larger token (grants together may start in any order here).
  let left = 0;
  for (const { event, token } of seen.log) {
    if (event === 'leave') left = Math.max(left, token);
    else assert.ok(token > left, `token ${token} after ${left} came out: ${JSON.stringify(seen.log)}`);
  }
});

test('a pipeline asking another limit than the key is held with fails with LockLimitMismatchError', opts, async () => {
  const key = 'mismatch';
  const holder = get(`/run?key=${key}&limit=3&hold=1500&name=holder`);
  while ((await get(`/seen?key=${key}`))?.grants.length !== 1) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(await get(`/run?key=${key}&name=plain&wait=0ms`), { error: 'LOCK_LIMIT_MISMATCH', heldWith: 3 });
  assert.deepEqual(await get(`/run?key=${key}&limit=4&name=four&wait=5s`), { error: 'LOCK_LIMIT_MISMATCH', heldWith: 3 });
  const same = await get(`/run?key=${key}&limit=3&weight=2&name=same&wait=5s`);
  assert.ok(same.token > (await holder).token, 'the same limit shares the key');
});

test('permits abandoned by an ended request lapse; the waiter gets them with a larger token', opts, async () => {
  const key = 'abandoned';
  const stale = await get(`/abandon?key=${key}&ttl=1500&limit=2&weight=2`);
  const next = await get(`/run?key=${key}&limit=2&weight=1&wait=10s&name=next`);
  assert.ok(next.token > stale.token, `${next.token} > ${stale.token}`);
  const seen = await get(`/seen?key=${key}`);
  assert.deepEqual(seen.grants.map((g) => g.name), ['next']);
});

// What an object of the release before permits stored: its one lease, under `lease`.
const EARLIER_OBJECT = `
import { DurableObject } from 'cloudflare:workers';
export class LockDurableObject extends DurableObject {
  async fetch() {
    await this.ctx.storage.put({ lease: { owner: 'old', token: 5000, expiresAt: Date.now() + 60000, granted: false }, lastToken: 5000 });
    return new Response('stored');
  }
}
export default { fetch: (request, env) => env.LOCKS.get(env.LOCKS.idFromName('leasehold:upgraded')).fetch(request) };
`;

test('an object stored by the release before permits keeps its lease and its token counter', opts, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'leasehold-do-'));
  try {
    const earlier = await startLockWorker({ script: EARLIER_OBJECT, scriptPath: 'earlier.mjs', durableObjectsPersist: dir });
    assert.equal(await (await earlier.dispatchFetch('http://worker.test/')).text(), 'stored');
    await earlier.dispose();
    const now = await startLockWorker({ scriptPath: 'js-tests/durable-object/permits-worker.mjs', durableObjectsPersist: dir });
    try {
      const response = await now.dispatchFetch('http://worker.test/upgraded?key=upgraded');
      const r = await response.json();
      assert.equal(r.error, undefined, r.error);
      assert.deepEqual(r.seen.holders.map((h) => [h.owner, h.fencingToken]), [['old', 5000]]);
      assert.equal(r.seen.limit, undefined, 'a plain lease');
      assert.deepEqual([r.other, r.renewed, r.released], ['none', true, true]);
      assert.ok(r.next > 5000, `the next token ${r.next} follows the stored one`);
    } finally {
      await now.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
