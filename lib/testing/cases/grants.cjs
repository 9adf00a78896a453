'use strict';
// A store that declares `grantsOnRelease` (with `subscribe`) queues the owners of
// `{ queue: true }` tries and hands a released lease to the first of them, telling the
// engine through the `subscribe` listener (README, "A store of your own").
const { expect, StoreContractError } = require('../checked-store.cjs');
const { QUEUE, NO_QUEUE, listen, checkGrant, handOver } = require('./listening.cjs');

/**
 * Hands the key over until a grant reaches the listener (the first handovers may find
 * the store's subscription still opening); answers `{ waiter, grant, held }`, the
 * waiter holding the lease (claimed).
 */
async function grantThroughListener(ctx, rec, key) {
  rec.claims = () => true;
  for (let round = 0; round < 4; round++) {
    const waiter = ctx.owner('waiter');
    // Short at first: a grant lost to an opening subscription is found by the next try.
    const handed = await handOver(ctx, rec, key, waiter, round === 0 ? 200 : 1000);
    if (handed.grant) return { waiter, ...handed };
    await ctx.store.release(key, waiter);
  }
  throw new StoreContractError("four releases in a row handed the lease to the queued owner but no grant reached subscribe's listener: tell grants through it");
}

/** Runs `body(rec, key)` with a listener on a fresh key, removed afterwards. */
async function withListener(ctx, body) {
  const key = ctx.key();
  const rec = listen(ctx, key);
  try {
    await body(rec, key);
  } finally {
    rec.off();
  }
}

const cases = [
  {
    name: "a queued try is handed the lease by the holder's release, told through subscribe's listener",
    needs: 'grants',
    run: (ctx) =>
      withListener(ctx, async (rec, key) => {
        const { waiter, grant } = await grantThroughListener(ctx, rec, key);
        const { store, owner, ttl } = ctx;
        expect((await store.acquire(key, owner('other'), ttl)) === undefined, 'the lease granted to the queued owner was free for another owner: the grant must hold the key');
        expect((await store.renew(key, waiter, ttl)) === true, "the queued owner could not renew the lease it was granted: the grant is that owner's lease");
        await store.release(key, waiter);
        const after = owner('next');
        const next = await store.acquire(key, after, ttl);
        expect(next !== undefined, "the key was still held after the granted owner's release");
        expect(next > grant.fencingToken, `the grant after a granted lease got token ${next}, not above ${grant.fencingToken}`);
        await store.release(key, after);
      }),
  },
  {
    name: 'a try by the owner a release handed the lease to is answered with that lease',
    needs: 'grants',
    run: (ctx) =>
      withListener(ctx, async (rec, key) => {
        const { waiter, grant } = await grantThroughListener(ctx, rec, key);
        const again = await ctx.store.acquire(key, waiter, ctx.ttl, QUEUE);
        expect(again === grant.fencingToken, `a try by the owner holding a granted lease answered ${again === undefined ? 'undefined' : `{ fencingToken: ${again} }`}, not the lease it was granted (token ${grant.fencingToken})`);
        await ctx.store.release(key, waiter);
      }),
  },
  {
    name: 'a grant no listener claims is released, so the key passes on',
    needs: 'grants',
    run: (ctx) =>
      withListener(ctx, async (rec, key) => {
        const first = await grantThroughListener(ctx, rec, key);
        await ctx.store.release(key, first.waiter);
        rec.claims = () => false;
        const waiter = ctx.owner('unclaimed');
        const handed = await handOver(ctx, rec, key, waiter);
        if (handed.token !== undefined) await ctx.store.release(key, waiter);
        const other = ctx.owner('other');
        await ctx.eventually('a grant nobody claimed kept the key: release a grant no listener claims', () => ctx.store.acquire(key, other, ctx.ttl));
        await ctx.store.release(key, other);
      }),
  },
  {
    name: 'queued owners are granted the lease in the order they queued',
    needs: 'grants',
    run: (ctx) =>
      withListener(ctx, async (rec, key) => {
        const { store, ttl, owner } = ctx;
        const warm = await grantThroughListener(ctx, rec, key);
        const w1 = owner('first');
        const w2 = owner('second');
        expect((await store.acquire(key, w1, ttl, QUEUE)) === undefined, 'a queued try on a held key was granted');
        expect((await store.acquire(key, w2, ttl, QUEUE)) === undefined, 'a queued try on a held key was granted');
        await rec.release(key, warm.waiter);
        const g1 = await rec.grantFor(w1, ctx.timeout / 4);
        expect(g1 !== undefined && rec.grantsTo(w2).length === 0, 'the release did not grant the lease to the owner queued first: grants go in queue order');
        checkGrant(g1, w1, warm.grant.fencingToken);
        await rec.release(key, w1);
        const g2 = await rec.grantFor(w2, ctx.timeout / 4);
        expect(g2 !== undefined, "the first owner's release did not grant the lease to the owner queued next");
        checkGrant(g2, w2, g1.grant.fencingToken);
        await store.release(key, w2);
      }),
  },
  {
    name: 'a try with { queue: false } on a held key does not queue its owner',
    needs: 'grants',
    run: (ctx) =>
      withListener(ctx, async (rec, key) => {
        const { store, ttl, owner } = ctx;
        const warm = await grantThroughListener(ctx, rec, key);
        const quick = owner('unqueued');
        expect((await store.acquire(key, quick, ttl, NO_QUEUE)) === undefined, 'a try with { queue: false } on a held key was granted');
        await rec.release(key, warm.waiter);
        const other = owner('other');
        await ctx.eventually("the key was not free after its holder's release: a try with { queue: false } must not queue its owner", () => store.acquire(key, other, ttl));
        expect(rec.grantsTo(quick).length === 0, 'the release granted the lease to the owner of a try with { queue: false }: that try must not queue');
        await store.release(key, other);
      }),
  },
  {
    name: 'a queued owner that gives up (released without holding) is not handed the lease',
    needs: 'grants',
    run: (ctx) =>
      withListener(ctx, async (rec, key) => {
        const { store, ttl, owner } = ctx;
        const warm = await grantThroughListener(ctx, rec, key);
        const quitter = owner('quitter');
        expect((await store.acquire(key, quitter, ttl, QUEUE)) === undefined, 'a queued try on a held key was granted');
        // What this release answers is not read: the engine ignores it.
        await store.release(key, quitter);
        expect((await store.renew(key, warm.waiter, ttl)) === true, "a queued owner's release ended the holder's lease");
        rec.claims = () => false;
        await rec.release(key, warm.waiter);
        const other = owner('other');
        await ctx.eventually("the key never came free after the holder's release: an owner that gave up must leave the queue, or its grant be released", () =>
          store.acquire(key, other, ttl),
        );
        await store.release(key, other);
      }),
  },
];

module.exports = { cases, grantThroughListener, withListener };
