// Shared and exclusive leases on TabLockStore (`leasehold/tabs`) in headless Chromium:
// pages of one origin call the store directly (js-tests/tabs/permits.mjs) and report its
// answers, or run pipelines with `mode`. Readers hold the key's Web Lock together, a
// writer alone, in arrival order. (`limit`: js-tests/tabs-limits.test.mjs.) The browser
// only has the wasm engine: these tests run in the wasm pass of the suite.
import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { TabPages, pageUntil, tabsSkip } from './support/tabs-pages.mjs';
import { Inside, assertRising, grantsReach, openPermitsPage } from './support/tabs-permits.mjs';

const skip = tabsSkip;
const SHARED_LIMIT = 2147483647;
const opts = { skip, timeout: 60_000 };

const pages = new TabPages();
before(async () => {
  if (!skip) await pages.start();
});
after(() => pages.stop());
beforeEach(async () => {
  if (!skip) await pages.fresh();
});

const openPage = () => openPermitsPage(pages);

test('readers of two pages hold together; a writer waits alone, and no later reader overtakes it', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'rw';
  const r1 = await a.call('acquire', { key, owner: 'r1', as: 'read' });
  const r2 = await b.call('acquire', { key, owner: 'r2', as: 'read' });
  const r3 = await a.call('acquire', { key, owner: 'r3', as: 'read' });
  assertRising([r1, r2, r3], 'readers together, each with its own token');
  assert.deepEqual(await a.call('modes'), ['shared', 'shared', 'shared']);
  assert.equal(await b.call('acquire', { key, owner: 'w', as: 'write', queue: true }), 'none', 'the writer waits');
  assert.equal(await a.call('acquire', { key, owner: 'r4', as: 'read' }), 'none', 'a reader behind a waiting writer is refused');
  assert.equal(await a.call('acquire', { key, owner: 'r5', as: 'read', queue: true }), 'none', 'and waits behind it');
  const seen = await a.call('inspect', key);
  assert.equal(seen.limit, SHARED_LIMIT);
  assert.deepEqual(seen.holders.map((h) => [h.owner, h.fencingToken, h.weight, h.mode]), [
    ['r1', r1, 1, 'shared'],
    ['r2', r2, 1, 'shared'],
    ['r3', r3, 1, 'shared'],
  ]);
  await a.call('release', { key, owner: 'r1' });
  await b.call('release', { key, owner: 'r2' });
  assert.deepEqual(await b.call('grantsOf', key), [], 'the writer waits for the last reader');
  await a.call('release', { key, owner: 'r3' });
  const [w] = await grantsReach(b, key, 1);
  assert.equal(w.owner, 'w');
  assert.deepEqual(await a.call('modes'), ['exclusive'], 'the writer alone');
  assert.deepEqual((await a.call('inspect', key)).holders.map((h) => [h.owner, h.weight, h.mode]), [['w', SHARED_LIMIT, 'exclusive']]);
  assert.deepEqual(await a.call('grantsOf', key), [], 'the reader behind it still waits');
  assert.equal(await b.call('release', { key, owner: 'w' }), true);
  const [r5] = await grantsReach(a, key, 1);
  assert.equal(r5.owner, 'r5');
  assertRising([r1, r2, r3, w.fencingToken, r5.fencingToken], 'tokens across modes');
  await a.call('release', { key, owner: 'r5' });
  assert.equal(await a.call('inspect', key), null);
  assert.deepEqual(pages.problems, []);
});

test('a writer holding keeps out readers and writers; then a reader waiting is granted first in line', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'writer-first';
  const w = await a.call('acquire', { key, owner: 'w', as: 'write' });
  assert.equal(typeof w, 'number');
  assert.equal(await b.call('acquire', { key, owner: 'r', as: 'read' }), 'none');
  assert.equal(await a.call('acquire', { key, owner: 'r-same-page', as: 'read' }), 'none', 'in the same page too');
  assert.equal(await b.call('acquire', { key, owner: 'w2', as: 'write' }), 'none');
  assert.equal(await b.call('acquire', { key, owner: 'r', as: 'read', queue: true }), 'none');
  assert.equal(await b.call('acquire', { key, owner: 'w2', as: 'write', queue: true }), 'none');
  await a.call('release', { key, owner: 'w' });
  const [r] = await grantsReach(b, key, 1);
  assert.equal(r.owner, 'r');
  assert.deepEqual(await b.call('grantsOf', key), [r], 'the writer behind the reader waits');
  await b.call('release', { key, owner: 'r' });
  const [, w2] = await grantsReach(b, key, 2);
  assert.equal(w2.owner, 'w2');
  assertRising([w, r.fencingToken, w2.fencingToken], 'tokens');
  await b.call('release', { key, owner: 'w2' });
});

test('renew and release act on one reader; a lapsed reader lets a waiting writer in', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'per-owner';
  const r1 = await a.call('acquire', { key, owner: 'r1', as: 'read', ttl: 10_000 });
  const short = await a.call('acquire', { key, owner: 'short', as: 'read', ttl: 400 });
  assert.equal(await a.call('renew', { key, owner: 'r1', ttl: 20_000 }), true);
  assert.equal(await a.call('renew', { key, owner: 'nobody' }), false);
  assert.equal(await a.call('release', { key, owner: 'r1' }), true);
  assert.equal(await a.call('renew', { key, owner: 'r1' }), false, 'released: no longer renewable');
  assert.equal(await a.call('release', { key, owner: 'r1' }), false);
  assert.equal(await b.call('acquire', { key, owner: 'w', as: 'write', queue: true }), 'none');
  const [w] = await grantsReach(b, key, 1); // once `short` lapses on its own
  assert.equal(w.owner, 'w');
  assertRising([r1, short, w.fencingToken], 'tokens');
  assert.equal(await a.call('renew', { key, owner: 'short' }), false, 'the lapsed reader cannot renew');
  await b.call('release', { key, owner: 'w' });
});

test("a page closed while reading frees its reader's share only; the writer waits for the other", opts, async () => {
  const [a, b, c] = [await openPage(), await openPage(), await openPage()];
  const key = 'closed';
  const r1 = await a.call('acquire', { key, owner: 'r1', as: 'read', ttl: 60_000 });
  const r2 = await b.call('acquire', { key, owner: 'r2', as: 'read', ttl: 60_000 });
  assert.equal(await c.call('acquire', { key, owner: 'w', as: 'write', queue: true }), 'none');
  await a.page.close();
  await pageUntil(c.page, () => navigator.locks.query().then((q) => q.held.length === 1));
  assert.deepEqual(await c.call('grantsOf', key), [], 'the other reader still holds');
  assert.equal(await b.call('renew', { key, owner: 'r2' }), true);
  await b.call('release', { key, owner: 'r2' });
  const [w] = await grantsReach(c, key, 1);
  assert.equal(w.owner, 'w');
  assertRising([r1, r2, w.fencingToken], 'tokens');
  await c.call('release', { key, owner: 'w' });
});

test('one limit per key: plain vs modes are answered { limit }, both ways, across pages and within one', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const plain = await a.call('acquire', { key: 'plain', owner: 'p' });
  assert.equal(typeof plain, 'number');
  assert.deepEqual(await b.call('acquire', { key: 'plain', owner: 'r', as: 'read', queue: true }), { limit: 1 });
  assert.deepEqual(await b.call('acquire', { key: 'plain', owner: 'w', as: 'write' }), { limit: 1 });
  assert.deepEqual(await a.call('acquire', { key: 'plain', owner: 'r', as: 'read' }), { limit: 1 }, 'in the holder\'s page');
  await a.call('acquire', { key: 'read', owner: 'r', as: 'read' });
  assert.deepEqual(await b.call('acquire', { key: 'read', owner: 'p', queue: true }), { limit: SHARED_LIMIT });
  assert.deepEqual(await a.call('acquire', { key: 'read', owner: 'p' }), { limit: SHARED_LIMIT });
  await a.call('acquire', { key: 'write', owner: 'w', as: 'write' });
  assert.deepEqual(await b.call('acquire', { key: 'write', owner: 'p', queue: true }), { limit: SHARED_LIMIT });
  assert.deepEqual(await a.call('modes'), ['exclusive', 'exclusive', 'shared'], 'no refused try was queued or took a lock');
  const pending = await a.page.evaluate(async () => (await navigator.locks.query()).pending.length);
  assert.equal(pending, 0);
  await a.call('release', { key: 'plain', owner: 'p' });
  assert.equal(typeof (await b.call('acquire', { key: 'plain', owner: 'r', as: 'read' })), 'number', 'a free key takes either');
});

test('bad options are refused naming what was wrong; limit 1 is a plain lease', opts, async () => {
  const { page, call } = await openPage();
  assert.equal(await call('permits'), true);
  const weight2 = await call('acquire', { key: 'k', owner: 'o', options: { limit: SHARED_LIMIT, weight: 2 } });
  assert.match(weight2, /^TypeError: TabLockStore takes 2147483647 permits as modes only: weight 1 \(shared\) or 2147483647 \(exclusive\), got weight 2/);
  assert.match(await call('acquire', { key: 'k', owner: 'o', options: { limit: 0, weight: 1 } }), /^RangeError: options\.limit must be an integer/);
  assert.match(await call('acquire', { key: 'k', owner: 'o', options: { limit: 3, weight: 4 } }), /^RangeError: options\.weight/);
  assert.match(await call('acquire', { key: 'k', owner: 'o', options: { queue: 1 } }), /^TypeError: options must be an object like \{ queue: true \}/);
  assert.equal(typeof (await call('acquire', { key: 'k', owner: 'o', options: { limit: 1, weight: 1 } })), 'number', 'limit 1 is a plain lease');
  assert.deepEqual(await page.evaluate(async () => (await navigator.locks.query()).held.map((l) => l.mode)), ['exclusive']);
});

// Engine level: pipelines with `mode` in three pages.

test('pipelines with mode: readers of two pages run together, the writer alone, a later reader after it', opts, async () => {
  const inside = new Inside();
  const [a, b, c] = [await openPage(), await openPage(), await openPage()];
  await inside.watch(a, b, c);
  const key = 'pipelines';
  const r1 = await a.call('hold', { key, name: 'r1', mode: 'shared' });
  const r2 = await b.call('hold', { key, name: 'r2', mode: 'shared' });
  assert.deepEqual([...inside.now.keys()], ['r1', 'r2'], 'the readers run together');
  const writer = c.call('hold', { key, name: 'w', mode: 'exclusive' });
  await pageUntil(c.page, () => window.permits.pending().then((n) => n === 1));
  const r3 = a.call('hold', { key, name: 'r3', mode: 'shared' });
  await pageUntil(c.page, () => window.permits.pending().then((n) => n === 2));
  assert.deepEqual([...inside.now.keys()], ['r1', 'r2'], 'the writer and the later reader wait');
  await a.call('letGo', 'r1');
  await b.call('letGo', 'r2');
  const w = await writer;
  assert.deepEqual([...inside.now.keys()], ['w'], 'the writer runs alone; the reader behind it still waits');
  await c.call('letGo', 'w');
  const r3Token = await r3;
  await a.call('letGo', 'r3');
  assert.equal(inside.violations, 0, JSON.stringify(inside.log));
  assert.deepEqual(inside.log.filter((e) => e.event === 'enter').map((e) => e.name), ['r1', 'r2', 'w', 'r3']);
  assertRising([r1, r2, w, r3Token], 'every grant a larger token, readers too');
  assert.deepEqual(pages.problems, []);
});

test('a plain pipeline on a key read elsewhere, and a reader on a key held plain, fail with LockLimitMismatchError', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  await a.page.exposeFunction('report', () => {});
  await a.call('hold', { key: 'read', name: 'r', mode: 'shared' });
  assert.deepEqual(await b.call('once', { key: 'read' }), { error: 'LOCK_LIMIT_MISMATCH', heldWith: SHARED_LIMIT });
  await a.call('acquire', { key: 'plain', owner: 'p' });
  assert.deepEqual(await b.call('once', { key: 'plain', mode: 'shared' }), { error: 'LOCK_LIMIT_MISMATCH', heldWith: 1 });
  assert.deepEqual(await b.call('once', { key: 'plain', mode: 'exclusive' }), { error: 'LOCK_LIMIT_MISMATCH', heldWith: 1 });
  await a.call('release', { key: 'plain', owner: 'p' });
  assert.equal(typeof (await b.call('once', { key: 'plain', mode: 'shared' })).token, 'number', 'free, the key takes a reader');
});
