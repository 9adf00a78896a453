// Leader election (issue #31) on the memory store, within one process: campaign's line,
// terms, resign(), abort, a leader whose event loop stalls past its ttl, lead()'s loop and
// what happens to its callback's errors, leader()/watchLeader(), and argument checks.
// The real stores run their fleets in election-{redis,postgres,etcd}.test.mjs.
// Run: node --test js-tests/election.test.mjs (LEASEHOLD_ENGINE=wasm: the wasm engine)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { campaign, lead, leader, watchLeader, MemoryLockStore, FakeTimeProvider, LockLostError } from 'leasehold';
import { within } from './support/async.mjs';

const HANG_MS = 10_000;

/** Blocks the event loop for `ms`, as a stopped process would be. */
function stall(ms) {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

test('five candidates: one leads at a time, in line, each term larger, resign() hands over at once', async () => {
  const store = new MemoryLockStore();
  const ttl = 10_000;
  const pending = [0, 1, 2, 3, 4].map((i) => campaign('scheduler', { store, ttl, name: `c${i}` }).then((l) => ({ i, l })));
  const order = [];
  let acting = 0;
  let previous = 0;
  let started = performance.now();
  for (let n = 0; n < 5; n++) {
    const { i, l } = await within(HANG_MS, `leader ${n + 1}`, Promise.race(pending.filter((_, k) => !order.includes(k))));
    assert.ok(performance.now() - started < ttl / 5, 'the next leader did not wait for the ttl');
    order.push(i);
    acting += 1;
    assert.equal(acting, 1);
    assert.ok(l.term > previous, `term ${l.term} after ${previous}`);
    previous = l.term;
    assert.equal(l.name, `c${i}`);
    assert.equal(l.signal.aborted, false);
    await sleep(5);
    acting -= 1;
    started = performance.now();
    assert.equal(await l.resign(), true);
    assert.equal(l.signal.aborted, true);
    assert.equal(l.signal.reason.name, 'AbortError');
    assert.equal(await l.resign(), false, 'a second resign() answers false');
  }
  assert.deepEqual(order, [0, 1, 2, 3, 4], 'first come, first led');
});

test("aborting a campaign's signal leaves the line; aborting it while leading steps down", async () => {
  const store = new MemoryLockStore();
  const first = await campaign('k', { store, ttl: 5000 });
  const controller = new AbortController();
  const waiting = campaign('k', { store, ttl: 5000, signal: controller.signal });
  const third = campaign('k', { store, ttl: 5000 });
  controller.abort(new Error('no longer interested'));
  await assert.rejects(waiting, /no longer interested/);
  await first.resign();
  const next = await within(HANG_MS, 'the third candidate', third);
  assert.ok(next.term > first.term);
  const leading = new AbortController();
  await next.resign();
  const l = await campaign('k', { store, ttl: 5000, signal: leading.signal });
  leading.abort(new Error('shutting down'));
  assert.equal(l.signal.aborted, true);
  assert.match(l.signal.reason.message, /shutting down/);
  assert.equal(await store.isLocked('k'), false, 'the lease was released');
  await assert.rejects(campaign('k', { store, ttl: 5000, signal: leading.signal }), /shutting down/);
});

test('a leader whose event loop stalls past its ttl reads its signal aborted before its next tick', async () => {
  const store = new MemoryLockStore();
  const ttl = 300;
  const l = await campaign('stall', { store, ttl });
  const next = campaign('stall', { store, ttl });
  let ticks = 0;
  let abortedAtTick;
  const ticking = new Promise((resolve) => {
    const timer = setInterval(() => {
      ticks += 1;
      if (ticks === 3) stall(ttl * 2); // the loop stops, as a SIGSTOPped process would
      if (ticks > 3) {
        abortedAtTick = l.signal.aborted;
        clearInterval(timer);
        resolve();
      }
    }, 10);
  });
  await within(HANG_MS, 'the ticks', ticking);
  assert.equal(abortedAtTick, true, 'the first tick after the stall saw the signal aborted');
  assert.ok(l.signal.reason instanceof LockLostError);
  const successor = await within(HANG_MS, 'the next leader', next);
  assert.ok(successor.term > l.term);
  assert.equal(await l.resign(), false);
  await successor.resign();
});

test('lead(): a term per win, back in line after each; an error steps down and goes to onError', async () => {
  const store = new MemoryLockStore();
  const controller = new AbortController();
  const terms = [];
  const errors = [];
  const done = lead(
    'loop',
    async ({ term, signal }) => {
      terms.push(term);
      assert.equal(signal.aborted, false);
      if (terms.length === 2) throw new Error('tick failed');
      if (terms.length === 4) controller.abort();
      await sleep(5);
    },
    { store, ttl: 1000, signal: controller.signal, onError: (error, l) => errors.push([error.message, l.term]) },
  );
  await within(HANG_MS, 'lead() to end', done);
  assert.equal(await done, undefined);
  assert.equal(terms.length, 4);
  for (let i = 1; i < terms.length; i++) assert.ok(terms[i] > terms[i - 1]);
  assert.deepEqual(errors, [['tick failed', terms[1]]]);
  assert.equal(await store.isLocked('loop'), false, 'stepped down when its signal aborted');
});

test('lead() without onError rejects with the error, after stepping down', async () => {
  const store = new MemoryLockStore();
  let failed;
  const leading = new Promise((resolve) => {
    failed = lead(
      'fail',
      async () => {
        resolve();
        await sleep(20);
        throw new Error('bug');
      },
      { store, ttl: 1000 },
    );
  });
  await within(HANG_MS, 'lead() to win', leading);
  const other = campaign('fail', { store, ttl: 1000 });
  await assert.rejects(within(HANG_MS, 'lead() to fail', failed), /bug/);
  const next = await within(HANG_MS, 'the other candidate', other);
  await next.resign();
});

test('lead(): what the callback throws after losing leadership is its way of stopping, not reported', async () => {
  const store = new MemoryLockStore();
  const controller = new AbortController();
  let runs = 0;
  const reported = [];
  await within(
    HANG_MS,
    'lead() to end',
    lead(
      'lost',
      async (l) => {
        runs += 1;
        if (runs === 2) return controller.abort();
        await l.resign();
        throw new Error('refused by the fence');
      },
      { store, ttl: 1000, signal: controller.signal, onError: (e) => reported.push(e) },
    ),
  );
  assert.equal(runs, 2);
  assert.deepEqual(reported, []);
});

test('leader() and watchLeader() name the leader, its term and time left, and follow changes', async (t) => {
  const store = new MemoryLockStore();
  if (typeof store.inspect !== 'function') {
    assert.throws(() => watchLeader(store, 'k'), /watchLeader\(\) needs the store's inspect\(key\) method/);
    await assert.rejects(leader(store, 'k'), /leader\(\) needs the store's inspect\(key\) method/);
    t.skip('this build has no MemoryLockStore#inspect');
    return;
  }
  assert.equal(await leader(store, 'office'), undefined);
  const controller = new AbortController();
  const seen = [];
  const watching = (async () => {
    for await (const now of watchLeader(store, 'office', { signal: controller.signal })) seen.push(now && { name: now.name, term: now.term });
  })();
  const a = await campaign('office', { store, ttl: 5000, name: 'web-1' });
  const now = await leader(store, 'office');
  assert.equal(now.name, 'web-1');
  assert.equal(now.term, a.term);
  assert.equal(now.owner, a.owner);
  assert.ok(now.ttl > 0 && now.ttl <= 5000);
  const b = campaign('office', { store, ttl: 5000, name: 'web-2' });
  await sleep(20);
  await a.resign();
  const second = await b;
  await sleep(50);
  await second.resign();
  await sleep(50);
  controller.abort();
  await within(HANG_MS, 'the watch to end', watching);
  assert.deepEqual(seen, [undefined, { name: 'web-1', term: a.term }, { name: 'web-2', term: second.term }, undefined]);
});

test('bad arguments are a TypeError or RangeError naming what was wrong', async () => {
  const store = new MemoryLockStore();
  await assert.rejects(campaign('', { store }), /key must be a non-empty string/);
  await assert.rejects(campaign('k', { ttl: 100 }), /store must be a LockStore/);
  await assert.rejects(campaign('k', { store, ttl: -1 }), RangeError);
  await assert.rejects(campaign('k', { store, name: '' }), /name must be a non-empty string/);
  await assert.rejects(campaign('k', { store, name: 'x'.repeat(129) }), /name must be at most 128/);
  await assert.rejects(campaign('k', { store, signal: {} }), /signal must be an AbortSignal/);
  await assert.rejects(campaign('k', { store, timeout: 5 }), /campaign has no option "timeout"/);
  await assert.rejects(campaign('k', null), /options must be an object/);
  await assert.rejects(campaign('k', { store: new MemoryLockStore({ timeProvider: new FakeTimeProvider() }) }), /system clock/);
  await assert.rejects(lead('k', 'not a function', { store }), /fn must be a function/);
  await assert.rejects(lead('k', async () => {}, { store, onError: 1 }), /onError must be a function/);
  assert.throws(() => watchLeader(null, 'k'), /store must be a LockStore/);
  const inspectable = { inspect: async () => undefined };
  assert.throws(() => watchLeader(inspectable, 'k', { interval: 0 }), /interval must be positive/);
  assert.throws(() => watchLeader(inspectable, 'k', { every: 1 }), /watchLeader has no option "every"/);
});
