'use strict';
// What a store declares beyond the three methods: `subscribe` (wake waiters at a
// release) and `localHandoff` (an engine passes a lease between its own executions,
// its tokens counting up from the store's grant). README, "A store of your own".
const { expect, show } = require('../checked-store.cjs');
const { listen } = require('./listening.cjs');

const cases = [
  {
    name: "subscribe's listener hears a release, and nothing once the function it returned was called",
    needs: 'announces',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const k = key();
      const rec = listen(ctx, k);
      try {
        // A subscription may take a moment to open (a LISTEN, a channel): release until heard.
        await ctx.eventually("no release of the key ever reached subscribe's listener: a store with subscribe must call it after a release", async () => {
          const o = owner('a');
          await ctx.eventually('the key was never free', () => store.acquire(k, o, ttl));
          await store.release(k, o);
          for (let i = 0; i < 20 && rec.calls.length === 0; i++) await ctx.pause(10);
          return rec.calls.length > 0;
        });
      } finally {
        rec.off();
      }
      rec.off();
      const heard = rec.calls.length;
      const o = owner('b');
      await store.acquire(k, o, ttl);
      await store.release(k, o);
      await ctx.pause(200);
      expect(rec.calls.length === heard, 'the listener was called after the function subscribe returned had removed it');
    },
  },
  {
    name: 'the function subscribe returns can be called twice',
    needs: 'subscribe',
    async run(ctx) {
      const off = ctx.raw.subscribe(ctx.key(), () => false);
      expect(typeof off === 'function', () => `subscribe returned ${show(off)}: it must return the function that removes the listener`);
      off();
      off();
    },
  },
  {
    name: 'localHandoff is a turn: a non-negative integer number of milliseconds',
    needs: 'localHandoff',
    async run({ raw }) {
      const turn = raw.localHandoff;
      expect(Number.isSafeInteger(turn) && turn >= 0, () => `localHandoff is ${show(turn)}: it must be a non-negative integer number of milliseconds`);
    },
  },
  {
    name: 'the next grant is above the token a holder carried to renew and release',
    needs: 'localHandoff',
    async run({ store, key, owner, ttl }) {
      const k = key();
      const a = owner('a');
      const t = await store.acquire(k, a, ttl);
      // An engine that passed the lease on locally carries tokens above the store's grant.
      const carried = { fencingToken: t + 1000 };
      expect((await store.renew(k, a, ttl, carried)) === true, "renew with the holder's carried { fencingToken } answered false: the fourth argument must not stop a renewal");
      await store.release(k, a, carried);
      const b = owner('b');
      const next = await store.acquire(k, b, ttl);
      expect(next !== undefined, "the key was still held after a release that carried the holder's token");
      expect(next > carried.fencingToken, `the grant after a release that carried token ${carried.fencingToken} got ${next}: with localHandoff the next grant must exceed the token the holder carried`);
      await store.release(k, b);
    },
  },
  {
    name: 'grants are never below the clock in microseconds',
    needs: 'localHandoff',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const k = key();
      const a = owner('a');
      const token = await store.acquire(k, a, ttl);
      await store.release(k, a);
      // The store's clock is its own: ten minutes of slack for a server's skew.
      const floor = ((ctx.fake ? ctx.clock.now() : Date.now()) - 600_000) * 1000;
      expect(token >= floor, `a grant got token ${token}, below the clock in microseconds (about ${Math.round(floor)}): with localHandoff, grants are at least max(last + 1, time in µs)`);
    },
  },
];

module.exports = { cases };
