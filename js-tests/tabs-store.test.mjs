// TabLockStore (`leasehold/tabs`) in headless Chromium: pages of one origin and a
// dedicated worker contend for one key through navigator.locks, with fencing tokens
// from IndexedDB. The pages (js-tests/tabs/) run the wasm engine from lib/entries/browser.mjs,
// served from 127.0.0.1, and report to a fenced resource in IndexedDB that counts
// overlaps and refuses stale tokens.
//
// The browser only has the wasm engine: these tests run in the wasm pass of the suite.
import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { TabPages, pageUntil, tabsSkip } from './support/tabs-pages.mjs';

const skip = tabsSkip;

test('TabLockStore outside a browser is a TypeError that says what it needs', async () => {
  const { TabLockStore } = await import('leasehold/tabs');
  assert.throws(() => new TabLockStore(), (error) => error instanceof TypeError && /navigator\.locks/.test(error.message));
  assert.throws(() => new TabLockStore({ prefx: 'x' }), /TabLockStore has no option "prefx"; its options are prefix, database/);
  assert.throws(() => new TabLockStore({ prefix: '' }), /prefix must be a non-empty string, got ""/);
  assert.throws(() => new TabLockStore('x'), /options must be an object, got "x"/);
});

const pages = new TabPages();
const problems = pages.problems;

before(async () => {
  if (!skip) await pages.start();
});
after(() => pages.stop());
// Each test gets a fresh browser context: its own origin storage and lock manager.
beforeEach(async () => {
  if (!skip) await pages.fresh();
});
const openPage = () => pages.open();

/** Calls contender.mjs's `method` in `page` (or, with `inWorker`, in its dedicated worker). */
function call(page, method, args = {}, inWorker = false) {
  return page.evaluate(
    ([m, a, w]) => (w ? window.worker(m, a) : window.contender[m](a)),
    [method, args, inWorker],
  );
}

/** Resolves once the origin's Web Lock queue holds `count` waiting requests. */
async function pendingReaches(page, count) {
  await pageUntil(page, (n) => navigator.locks.query().then((q) => q.pending.length === n), count);
}

function assertIncreasing(tokens, what) {
  for (let i = 1; i < tokens.length; i++) {
    assert.ok(Number.isSafeInteger(tokens[i]) && tokens[i] > tokens[i - 1], `${what}: ${tokens.join(', ')}`);
  }
}

test('three pages and a dedicated worker loop on one key: no overlap, tokens increase in grant order', { skip, timeout: 60_000 }, async () => {
  const pages = [await openPage(), await openPage(), await openPage()];
  const key = 'contended';
  const count = 6;
  const runs = [
    ...pages.map((page, i) => call(page, 'loop', { key, name: `page${i}`, count, holdMs: 5 })),
    // A second loop in the first page: waiters of one page and of others at once.
    call(pages[0], 'loop', { key, name: 'page0b', count, holdMs: 5 }),
    call(pages[0], 'loop', { key, name: 'worker', count, holdMs: 5 }, true),
  ];
  const tokensByContender = await Promise.all(runs);
  const state = await call(pages[1], 'readResource');
  assert.deepEqual(problems, []);
  assert.equal(state.overlaps, 0, 'no two holders at once');
  assert.equal(state.log.length, runs.length * count);
  assertIncreasing(
    state.log.map((entry) => entry.token),
    'tokens in grant order',
  );
  for (const tokens of tokensByContender) assertIncreasing(tokens, 'each contender\'s tokens');
  // Every contender had turns while the others waited (a worker too).
  assert.deepEqual(new Set(state.log.map((entry) => entry.name)), new Set(['page0', 'page0b', 'page1', 'page2', 'worker']));
});

test('waiters in three pages and a worker are served in the order they queued; fail fast elsewhere', { skip, timeout: 60_000 }, async () => {
  const [a, b, c, d] = [await openPage(), await openPage(), await openPage(), await openPage()];
  const key = 'fifo';
  const first = await call(a, 'hold', { key, name: 'a' });
  assert.equal(await call(d, 'isLocked', key), true);
  assert.equal(await call(d, 'tryOnce', { key }), 'rejected', 'a fail-fast try in another page is rejected');
  await call(b, 'start', { key, name: 'b', wait: '30s' });
  await pendingReaches(a, 1);
  await call(d, 'start', { key, name: 'worker', wait: '30s' }, true);
  await pendingReaches(a, 2);
  await call(c, 'start', { key, name: 'c', wait: '30s' });
  await pendingReaches(a, 3);
  await call(a, 'letGo', 'a');
  await Promise.all([
    b.evaluate(() => window.contender.finished('b')),
    c.evaluate(() => window.contender.finished('c')),
    d.evaluate(() => window.worker('finished', 'worker')),
  ]);
  const state = await call(a, 'readResource');
  assert.deepEqual(problems, []);
  assert.equal(state.overlaps, 0);
  assert.deepEqual(state.log.map((entry) => entry.name), ['a', 'b', 'worker', 'c'], 'arrival order');
  assert.equal(state.log[0].token, first);
  assertIncreasing(state.log.map((entry) => entry.token), 'tokens in grant order');
  assert.equal(await call(d, 'isLocked', key), false, 'free after the last release');
  assert.equal(typeof (await call(d, 'tryOnce', { key })), 'number', 'and a fail-fast try takes it');
});

test('a page closed while holding frees the key for the next waiter, with a larger token', { skip, timeout: 60_000 }, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'closed';
  const first = await call(a, 'hold', { key, name: 'a', ttl: '1m' });
  await call(b, 'start', { key, name: 'b', wait: '30s' });
  await pendingReaches(b, 1);
  await a.close();
  const second = await b.evaluate(() => window.contender.finished('b'));
  assert.ok(second > first, `the next holder's token ${second} > ${first}`);
  assert.deepEqual(problems, []);
});

test('a holder that sleeps past its ttl loses the key; its late write with the old token is refused', { skip, timeout: 60_000 }, async () => {
  const [a, b] = [await openPage(), await openPage()];
  const key = 'sleeper';
  const stale = await call(a, 'sleeper', { key, name: 'a', ttl: 1_000, sleepMs: 2_500 });
  await call(b, 'start', { key, name: 'b', wait: '30s' });
  await pendingReaches(b, 1);
  // Woken, it falls asleep at once: no timer runs, so nothing renews its lease.
  const outcome = await a.evaluate(() => window.contender.letGo('a'));
  const fresh = await b.evaluate(() => window.contender.finished('b'));
  const state = await call(b, 'readResource');
  assert.ok(fresh > stale, `the new holder's token ${fresh} > the sleeper's ${stale}`);
  assert.equal(outcome.token, stale);
  assert.equal(outcome.lost, 'LOCK_LOST', 'the sleeper\'s signal was aborted with LockLostError');
  assert.equal(outcome.accepted, false, 'the sleeper\'s write was refused');
  assert.deepEqual(
    state.writes.map(({ name, accepted }) => [name, accepted]),
    [
      ['b', true],
      ['a', false],
    ],
  );
  assert.deepEqual(problems, []);
});

test('inspect across pages: the holder and two waiters in queue order; list; a missing key', { skip, timeout: 60_000 }, async () => {
  const [a, b, c] = [await openPage(), await openPage(), await openPage()];
  const key = 'inspected';
  const first = await call(a, 'hold', { key, name: 'a' });
  await call(b, 'start', { key, name: 'b', wait: '30s' });
  await pendingReaches(a, 1);
  await call(c, 'start', { key, name: 'c', wait: '30s' });
  await pendingReaches(a, 2);
  // A waiter's record follows its Web Lock request by an IndexedDB write.
  await pageUntil(c, (k) => window.contender.inspect({ key: k, prefix: '' }).then((r) => r.seen?.waiters.length === 2), key);
  const { seen, keys, now } = await call(c, 'inspect', { key, prefix: 'insp' });
  assert.deepEqual(keys, [key]);
  assert.equal(seen.key, key);
  assert.equal(seen.holders.length, 1);
  assert.equal(seen.holders[0].fencingToken, first, "the holder's token");
  assert.ok(seen.holders[0].ttl > 0 && seen.holders[0].ttl <= 10_000, `time left ${seen.holders[0].ttl}`);
  assert.match(seen.holders[0].owner, /^[0-9a-f]{32}$/, 'a browser owner: the random id alone');
  assert.equal(seen.waiters.length, 2);
  assert.ok(seen.waiters[0].since <= seen.waiters[1].since && seen.waiters[1].since <= now, 'in the order they queued');
  assert.equal(new Set([seen.holders[0].owner, ...seen.waiters.map((w) => w.owner)]).size, 3);
  await call(a, 'letGo', 'a');
  await Promise.all([b.evaluate(() => window.contender.finished('b')), c.evaluate(() => window.contender.finished('c'))]);
  const after = await call(a, 'inspect', { key, prefix: '' });
  assert.equal(after.seen, null, 'nothing held or waited for once all ran');
  assert.deepEqual(after.keys, []);
  assert.equal((await call(b, 'inspect', { key: 'never', prefix: 'x' })).seen, null);
  assert.deepEqual(problems, []);
});
