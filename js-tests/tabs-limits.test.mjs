// `limit` and `weight` on TabLockStore (`leasehold/tabs`) in headless Chromium: each
// permit is a Web Lock of its own, granted by whoever holds the key's Web Lock
// exclusively after counting those held (lib/stores/tabs/limits.mjs). Pages of one
// origin call the store directly (js-tests/tabs/permits.mjs), or run pipelines with
// `limit`. The browser only has the wasm engine: these tests run in the wasm pass.
import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { TabPages, pageUntil, tabsSkip } from './support/tabs-pages.mjs';
import { Inside, assertFenced, assertRising, grantsReach, openPermitsPage } from './support/tabs-permits.mjs';

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
const permit = (limit, weight) => ({ limit, weight });

test('limit 3 across pages: weights are summed, a release makes room; inspect and list show the permits', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'weights';
  const x = await a.call('acquire', { key, owner: 'x', options: permit(3, 2) });
  const y = await b.call('acquire', { key, owner: 'y', options: permit(3, 1) });
  assertRising([x, y], 'tokens');
  assert.equal(await b.call('acquire', { key, owner: 'z', options: permit(3, 1) }), 'none', '2 + 1 fill limit 3');
  assert.equal(await a.call('acquire', { key, owner: 'z', options: permit(3, 1) }), 'none', 'in the other page too');
  const seen = await a.call('inspect', key);
  assert.equal(seen.limit, 3);
  assert.deepEqual(seen.holders.map((h) => [h.owner, h.fencingToken, h.weight, h.mode]), [
    ['x', x, 2, undefined],
    ['y', y, 1, undefined],
  ]);
  assert.deepEqual(seen.waiters, []);
  const listed = await a.page.evaluate(async () => {
    const { TabLockStore } = await import('/lib/stores/tabs/index.mjs');
    const keys = [];
    for await (const k of new TabLockStore({ prefix: 'tabs-permits' }).list()) keys.push(k);
    return keys;
  });
  assert.deepEqual(listed, [key], 'a key held by permits alone is listed once');
  assert.equal(await a.call('release', { key, owner: 'x' }), true);
  const z = await b.call('acquire', { key, owner: 'z', options: permit(3, 2) });
  assertRising([x, y, z], 'tokens');
  assert.equal(await a.call('renew', { key, owner: 'x' }), false, 'released');
  assert.equal(await b.call('renew', { key, owner: 'y' }), true);
  await b.call('release', { key, owner: 'y' });
  await b.call('release', { key, owner: 'z' });
  assert.equal(await a.call('inspect', key), null);
  assert.deepEqual(pages.problems, []);
});

test('FIFO: a heavy request at the head is not overtaken; then the queue is served while each fits', opts, async () => {
  const [a, b, c] = [await openPage(), await openPage(), await openPage()];
  const key = 'fifo';
  const first = await a.call('acquire', { key, owner: 'a', options: permit(3, 1) });
  assert.equal(await b.call('acquire', { key, owner: 'heavy', options: { ...permit(3, 3), queue: true } }), 'none');
  assert.equal(await c.call('acquire', { key, owner: 'light1', options: { ...permit(3, 1), queue: true } }), 'none', 'a light one behind it waits');
  assert.equal(await c.call('acquire', { key, owner: 'light2', options: { ...permit(3, 1), queue: true } }), 'none');
  assert.equal(await a.call('acquire', { key, owner: 'try', options: permit(3, 1) }), 'none', 'a light try is refused though a permit is free');
  await pageUntil(a.page, (k) => window.permits.inspect(k).then((seen) => seen?.waiters.length === 3), key);
  const seen = await a.call('inspect', key);
  assert.deepEqual(seen.holders.map((h) => h.owner), ['a']);
  assert.deepEqual(seen.waiters.map((w) => w.owner), ['heavy', 'light1', 'light2'], 'the head waiter, then the queue');
  await a.call('release', { key, owner: 'a' });
  const [heavy] = await grantsReach(b, key, 1);
  assert.equal(heavy.owner, 'heavy');
  assert.deepEqual(await c.call('grantsOf', key), [], 'the light ones still wait');
  await b.call('release', { key, owner: 'heavy' });
  const lights = await grantsReach(c, key, 2);
  assert.deepEqual(lights.map((g) => g.owner), ['light1', 'light2'], 'both fit: both granted, in order');
  assertRising([first, heavy.fencingToken, ...lights.map((g) => g.fencingToken)], 'tokens in grant order');
  for (const owner of ['light1', 'light2']) await c.call('release', { key, owner });
});

test('one limit per key: limit 3 vs 4, plain, reader and writer are answered { limit }, both ways', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  await a.call('acquire', { key: 'counted', owner: 'x', options: permit(3, 1) });
  assert.deepEqual(await b.call('acquire', { key: 'counted', owner: 'o', options: permit(4, 1) }), { limit: 3 });
  assert.deepEqual(await b.call('acquire', { key: 'counted', owner: 'o', options: { ...permit(4, 1), queue: true } }), { limit: 3 });
  assert.deepEqual(await b.call('acquire', { key: 'counted', owner: 'o' }), { limit: 3 }, 'a plain try');
  assert.deepEqual(await b.call('acquire', { key: 'counted', owner: 'o', as: 'read' }), { limit: 3 }, 'a reader');
  assert.deepEqual(await a.call('acquire', { key: 'counted', owner: 'o', as: 'write' }), { limit: 3 }, "a writer in the holder's page");
  await a.call('acquire', { key: 'plain', owner: 'p' });
  assert.deepEqual(await b.call('acquire', { key: 'plain', owner: 'o', options: { ...permit(3, 1), queue: true } }), { limit: 1 });
  await a.call('acquire', { key: 'read', owner: 'r', as: 'read' });
  assert.deepEqual(await b.call('acquire', { key: 'read', owner: 'o', options: permit(3, 1) }), { limit: SHARED_LIMIT });
  const pending = await a.page.evaluate(async () => (await navigator.locks.query()).pending.length);
  assert.equal(pending, 0, 'no refused try was queued');
  await a.call('release', { key: 'counted', owner: 'x' });
  assert.equal(typeof (await b.call('acquire', { key: 'counted', owner: 'o', options: permit(4, 4) })), 'number', 'a free key takes another limit');
});

test("a page closed while holding permits frees them for the waiter; the other holder's stay", opts, async () => {
  const [a, b, c] = [await openPage(), await openPage(), await openPage()];
  const key = 'closed';
  const x = await a.call('acquire', { key, owner: 'x', options: permit(2, 1), ttl: 60_000 });
  const y = await b.call('acquire', { key, owner: 'y', options: permit(2, 1), ttl: 60_000 });
  assert.equal(await c.call('acquire', { key, owner: 'w', options: { ...permit(2, 2), queue: true } }), 'none');
  await a.page.close();
  await pageUntil(c.page, (k) => window.permits.inspect(k).then((seen) => seen?.holders.length === 1), key);
  assert.deepEqual(await c.call('grantsOf', key), [], 'y still holds one of the two');
  await b.call('release', { key, owner: 'y' });
  const [w] = await grantsReach(c, key, 1);
  assert.equal(w.owner, 'w');
  assertRising([x, y, w.fencingToken], 'tokens');
  await c.call('release', { key, owner: 'w' });
});

test('a waiter that leaves the queue while at its head lets the next one in', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'leaving';
  await a.call('acquire', { key, owner: 'x', options: permit(2, 1) });
  assert.equal(await b.call('acquire', { key, owner: 'heavy', options: { ...permit(2, 2), queue: true } }), 'none');
  assert.equal(await b.call('acquire', { key, owner: 'light', options: { ...permit(2, 1), queue: true } }), 'none');
  await pageUntil(a.page, (k) => window.permits.inspect(k).then((seen) => seen?.waiters.length === 2), key);
  assert.equal(await b.call('release', { key, owner: 'heavy' }), false, 'a queued owner leaves');
  const [light] = await grantsReach(b, key, 1);
  assert.equal(light.owner, 'light');
  await b.call('release', { key, owner: 'light' });
  await a.call('release', { key, owner: 'x' });
  assert.equal(await a.call('inspect', key), null);
});

// Engine level: pipelines with `limit` in three pages.

test('pipelines with limit 3 and weights 1 and 2 in three pages: never more than 3 inside, several at once', opts, async () => {
  const inside = new Inside(3);
  const [a, b, c] = [await openPage(), await openPage(), await openPage()];
  await inside.watch(a, b, c);
  const key = 'pipelines';
  const runs = await Promise.all([
    a.call('loop', { key, name: 'a', limit: 3, weight: 1, count: 4, holdMs: 30 }),
    a.call('loop', { key, name: 'a2', limit: 3, weight: 2, count: 4, holdMs: 30 }),
    b.call('loop', { key, name: 'b', limit: 3, weight: 1, count: 4, holdMs: 30 }),
    c.call('loop', { key, name: 'c', limit: 3, weight: 2, count: 4, holdMs: 30 }),
  ]);
  assert.equal(inside.violations, 0, JSON.stringify(inside.log));
  assert.ok(inside.most >= 2, `several permits at once, saw ${inside.most}`);
  const entered = inside.log.filter((e) => e.event === 'enter');
  assert.equal(entered.length, 16);
  assert.equal(new Set(entered.map((e) => e.token)).size, 16, 'a token per grant');
  assertFenced(inside.log); // grants in several pages at once may report in any order
  for (const tokens of runs) assertRising(tokens, "each loop's tokens");
  assert.deepEqual(pages.problems, []);
});

test('a pipeline asking another limit than the key is held with fails with LockLimitMismatchError', opts, async () => {
  const [a, b] = [await openPage(), await openPage()];
  await a.page.exposeFunction('report', () => {});
  await a.call('hold', { key: 'k', name: 'h', limit: 3, weight: 1 });
  assert.deepEqual(await b.call('once', { key: 'k' }), { error: 'LOCK_LIMIT_MISMATCH', heldWith: 3 });
  assert.deepEqual(await b.call('once', { key: 'k', mode: 'shared' }), { error: 'LOCK_LIMIT_MISMATCH', heldWith: 3 });
});
