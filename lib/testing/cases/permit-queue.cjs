'use strict';
// Permits on a store that grants on release: queued owners are handed permits from the
// head of the queue, in order, while each fits, and nobody overtakes the head: a heavy
// or exclusive request waiting first is not starved by later, lighter ones.
const { expect, SHARED_LIMIT } = require('../checked-store.cjs');
const { checkGrant } = require('./listening.cjs');
const { grantThroughListener, withListener } = require('./grants.cjs');
const { permit, said } = require('./permits.cjs');

const queued = (limit, weight) => ({ ...permit(limit, weight), queue: true });

/**
 * Holders of `held` weights take the key, an owner asking `head` of `limit` queues, then
 * lighter owners arrive (`weight` each: two queued, one not). The holders' releases must
 * hand the head its permits first; the later owners follow, in the order they queued.
 * `what` names the head in messages ("a try for 3 of 4 permits", "a writer").
 */
async function headFirst(ctx, { limit, held, head: headWeight, weight, what }) {
  await withListener(ctx, async (rec, key) => {
    const { store, owner, ttl } = ctx;
    // A plain lease handed over first: the subscription is then known to be live.
    const warm = await grantThroughListener(ctx, rec, key);
    await store.release(key, warm.waiter);
    const holders = [];
    for (const w of held) {
      const o = owner(`held${w}`);
      const token = await store.acquire(key, o, ttl, permit(limit, w));
      expect(token !== undefined, `a try for ${w} of ${limit} permits that fit was refused`);
      holders.push({ owner: o, token, weight: w });
    }
    const head = owner('head');
    expect((await store.acquire(key, head, ttl, queued(limit, headWeight))) === undefined, `${what} was granted although it did not fit`);
    const [first, unqueued, last] = [owner('later'), owner('unqueued'), owner('last')];
    const overtook = (token, how) =>
      `a later ${how} for ${weight} permit${weight > 1 ? 's' : ''} answered ${said(token)} while ${what} was queued ahead of it: nobody overtakes the head of the queue (FIFO)`;
    let token = await store.acquire(key, first, ttl, queued(limit, weight));
    expect(token === undefined, () => overtook(token, 'queued try'));
    token = await store.acquire(key, unqueued, ttl, permit(limit, weight));
    expect(token === undefined, () => overtook(token, 'try'));
    token = await store.acquire(key, last, ttl, queued(limit, weight));
    expect(token === undefined, () => overtook(token, 'queued try'));
    let top = Math.max(...holders.map((h) => h.token));
    // Release the holders until the head fits; each release before that hands nothing on.
    while (holders.length > 0) {
      await rec.release(key, holders.shift().owner);
      if (holders.reduce((sum, h) => sum + h.weight, 0) + headWeight <= limit) break;
      // Asked again, a queued owner a release handed permits to is answered with them.
      token = await store.acquire(key, first, ttl, queued(limit, weight));
      expect(token === undefined && rec.grantsTo(first).length === 0, () => `${overtook(token, 'queued owner')}, even when a release frees permits it would fit in`);
    }
    const headGrant = await rec.grantFor(head, ctx.timeout / 4);
    expect(headGrant !== undefined, `the holders' releases made room for ${what} at the head of the queue, but no grant to it reached subscribe's listener`);
    expect(rec.grantsTo(first).length === 0 && rec.grantsTo(last).length === 0, `a release granted a later owner before ${what} at the head of the queue (FIFO)`);
    checkGrant(headGrant, head, top);
    top = headGrant.grant.fencingToken;
    for (const h of holders) await rec.release(key, h.owner);
    await rec.release(key, head);
    const g1 = await rec.grantFor(first, ctx.timeout / 4);
    expect(g1 !== undefined, `the release of ${what} did not hand permits on to the owner queued next`);
    checkGrant(g1, first, top);
    expect(rec.grantsTo(unqueued).length === 0, 'a release granted permits to the owner of a try with { queue: false }: that try must not queue');
    // Both later owners fit at once: the second is handed its permits after the first.
    const g2 = await rec.grantFor(last, ctx.timeout / 4);
    expect(g2 !== undefined, `the release of ${what} handed permits to the first later owner but not to the next, though both fit: hand permits on from the head while each fits`);
    checkGrant(g2, last, g1.grant.fencingToken);
    expect(rec.calls.indexOf(g1) < rec.calls.indexOf(g2), 'the owners queued later were offered their grants out of queue order');
    for (const o of [first, last]) await store.release(key, o);
  });
}

/**
 * A heavy owner queued at the head gives up (released without holding, as the engine
 * does for a waiter that stops): once the holders are gone, the owner behind it is
 * handed its permits. A store may keep the quitter queued until its grant, unclaimed,
 * is released; it must not hold the queue back for ever.
 */
async function quitterAtHead(ctx) {
  await withListener(ctx, async (rec, key) => {
    const { store, owner, ttl } = ctx;
    const warm = await grantThroughListener(ctx, rec, key);
    await store.release(key, warm.waiter);
    const holders = [owner('held'), owner('held')];
    for (const o of holders) expect((await store.acquire(key, o, ttl, permit(3, 1))) !== undefined, 'a try for 1 of 3 permits that fit was refused');
    const quitter = owner('quitter');
    const behind = owner('behind');
    expect((await store.acquire(key, quitter, ttl, queued(3, 3))) === undefined, 'a try for 3 of 3 permits was granted while 2 were held');
    expect((await store.acquire(key, behind, ttl, queued(3, 1))) === undefined, 'a later try for 1 permit was granted while a try for 3 was queued ahead of it: nobody overtakes the head of the queue (FIFO)');
    await store.release(key, quitter);
    rec.claims = (grant) => grant.owner !== quitter;
    for (const o of holders) await rec.release(key, o);
    await ctx.eventually(
      "the owner queued behind one that gave up was never handed its permits after the holders left: a queued owner's release takes it out of the queue (or its unclaimed grant is released)",
      async () => rec.grantsTo(behind).length > 0 || (await store.acquire(key, behind, ttl, queued(3, 1))) !== undefined,
    );
    await store.release(key, behind);
  });
}

const cases = [
  {
    name: 'permits: a heavy try at the head of the queue is not overtaken by lighter ones; grants follow queue order',
    needs: ['permits', 'grants'],
    run: (ctx) => headFirst(ctx, { limit: 4, held: [1, 1, 1], head: 3, weight: 1, what: 'a try for 3 of 4 permits' }),
  },
  {
    name: 'mode: a writer at the head of the queue is not overtaken by later readers',
    needs: ['modes', 'grants'],
    run: (ctx) => headFirst(ctx, { limit: SHARED_LIMIT, held: [1, 1], head: SHARED_LIMIT, weight: 1, what: 'a writer' }),
  },
  {
    name: 'permits: an owner that gives up at the head of the queue does not hold back those behind it',
    needs: ['permits', 'grants'],
    run: quitterAtHead,
  },
];

module.exports = { cases };
