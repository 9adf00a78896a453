// The one reconciler of the stores' release announcements (lib/stores/shared/reconciler.cjs),
// driven through its driver interface with a recording driver and fake time: what Redis
// and PostgreSQL get from it, without their servers (their own tests run it on them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import FakeTimers from '@sinonjs/fake-timers';
import { flush } from './support/time.mjs';

const require = createRequire(import.meta.url);
const { ChannelReconciler } = require('../lib/stores/shared/reconciler.cjs');
const { ReleaseListeners } = require('../lib/stores/shared/release-listeners.cjs');

/** Lets every pending microtask and promise job run. */
const settle = () => flush(1);

function setup({ lingerMs = 0, connectionLingerMs = Infinity, driver = {} } = {}) {
  const log = [];
  let opened = 0;
  const base = {
    open: () => ({ id: ++opened, closed: false }),
    apply: async (conn, wanted, gone) => log.push({ conn: conn.id, wanted: [...wanted].sort(), gone: [...gone].sort() }),
    discard: async (conn) => {
      conn.closed = true;
      log.push({ discarded: conn.id });
    },
  };
  let reconciler;
  const listeners = new ReleaseListeners((channel) => reconciler.changed(channel));
  reconciler = new ChannelReconciler({ listeners, lingerMs, connectionLingerMs, driver: { ...base, ...driver } });
  return { reconciler, listeners, log };
}

test("a turn's changes are one pass: what is wanted at its end, not each step", async () => {
  const { reconciler, listeners, log } = setup();
  const offs = ['a', 'b', 'c'].map((c) => listeners.add(c, () => {}));
  offs[1](); // 'b' came and went in the same turn: nothing to send for it
  await settle();
  assert.deepEqual(log, [{ conn: 1, wanted: ['a', 'c'], gone: [] }]);
  assert.ok(reconciler.isSubscribed('a') && !reconciler.isSubscribed('b'));
  offs[0]();
  listeners.add('a', () => {}); // left and came back in one turn: stays
  await settle();
  assert.equal(log.length, 1);
});

test('a channel left without listeners lingers lingerMs, then goes; one waited for again stays', async () => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  try {
    const { listeners, log, reconciler } = setup({ lingerMs: 1000 });
    const offA = listeners.add('a', () => {});
    const offB = listeners.add('b', () => {});
    await settle();
    offA();
    offB();
    await settle();
    assert.equal(log.length, 1, 'nothing unsubscribed before the linger');
    clock.tick(500);
    listeners.add('b', () => {}); // waited for again while lingering
    await settle();
    clock.tick(600);
    await settle();
    assert.deepEqual(log.at(-1), { conn: 1, wanted: [], gone: ['a'] });
    assert.ok(reconciler.isSubscribed('b'));
  } finally {
    clock.uninstall();
  }
});

test('a failed subscription is tried again by the next pass; a dead connection is replaced', async () => {
  let fail = 1;
  let dead = false;
  const dropped = [];
  const { listeners, log, reconciler } = setup({
    driver: {
      apply: async (conn, wanted, gone) => {
        if (fail-- > 0) throw new Error('not connected');
        log.push({ conn: conn.id, wanted: [...wanted].sort(), gone: [...gone].sort() });
      },
      isDead: () => dead,
      dropped: (conn) => dropped.push(conn.id),
    },
  });
  listeners.add('a', () => {});
  await settle();
  assert.deepEqual(log, []);
  assert.ok(!reconciler.isSubscribed('a'));
  reconciler.sync(); // a reconnect's pass
  await settle();
  assert.deepEqual(log, [{ conn: 1, wanted: ['a'], gone: [] }]);
  // The connection dies: forgotten, and the next change opens another with every channel.
  fail = 1;
  dead = true;
  listeners.add('b', () => {});
  await settle();
  assert.deepEqual(dropped, [1]);
  assert.equal(reconciler.connection, null);
  dead = false;
  listeners.add('c', () => {});
  await settle();
  assert.deepEqual(log.at(-1), { conn: 2, wanted: ['a', 'b', 'c'], gone: [] });
});

test('an idle connection the store may close goes after connectionLingerMs; stop() discards one being opened', async () => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  try {
    const { listeners, log, reconciler } = setup({ connectionLingerMs: 1000, driver: { closesWhenIdle: () => true } });
    const off = listeners.add('a', () => {});
    await settle();
    off();
    await settle();
    assert.deepEqual(log.at(-1), { conn: 1, wanted: [], gone: ['a'] });
    assert.notEqual(reconciler.connection, null, 'kept while it lingers');
    clock.tick(1000);
    await settle();
    assert.deepEqual(log.at(-1), { discarded: 1 });
    assert.equal(reconciler.connection, null);
  } finally {
    clock.uninstall();
  }
  let finishOpen;
  const { listeners, log, reconciler } = setup({ driver: { open: () => new Promise((resolve) => (finishOpen = resolve)) } });
  listeners.add('a', () => {});
  await settle();
  await reconciler.settled(); // not held up by the open in flight
  reconciler.stop();
  finishOpen({ id: 7 });
  await settle();
  assert.deepEqual(log, [{ discarded: 7 }]);
  assert.equal(reconciler.connection, null);
});
