'use strict';
// A lease lasts its ttl from the last acquire or renew, and no longer. On fake time the
// kit checks the instants exactly; on a store's own clock it checks only what a loaded
// machine cannot blur, and tries again when its own waits overran.
const { expect, StoreContractError } = require('../checked-store.cjs');

/** Real time, read locally: only to tell whether the kit's own waits overran. */
const now = () => Date.now();

const cases = [
  {
    name: 'a lease not renewed ends after its ttl; its old owner can then neither renew nor release it',
    async run(ctx) {
      const { store, key, owner, ttl, shortTtl } = ctx;
      const k = key();
      const a = owner('a');
      const b = owner('b');
      const c = owner('c');
      const first = await store.acquire(k, a, shortTtl);
      if (ctx.fake) {
        await ctx.elapse(shortTtl - 1);
        expect((await store.acquire(k, b, ttl)) === undefined, `the lease was free ${shortTtl - 1} ms into a ${shortTtl} ms ttl: a lease must last its ttl`);
        await ctx.elapse(1);
      }
      const next = await ctx.eventually(
        `a lease of ${shortTtl} ms was never free for another owner: a lease must end after its ttl`,
        () => store.acquire(k, b, ttl),
      );
      expect(next > first, `the grant after an expiry got token ${next}, not above the expired lease's ${first}: tokens rise across expiry too`);
      const renewed = await store.renew(k, a, shortTtl);
      expect(renewed === false, `renew by the owner of an expired lease answered ${renewed}: its lease ended, and the key is another's`);
      await store.release(k, a);
      expect((await store.acquire(k, c, ttl)) === undefined, "release by the owner of an expired lease freed the new holder's lease");
      await store.release(k, b);
    },
  },
  {
    name: 'renew pushes the end of the lease to ttl from the renewal',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const T = ctx.shortTtl;
      if (ctx.fake) {
        const k = key();
        const a = owner('a');
        await store.acquire(k, a, T);
        await ctx.elapse(Math.ceil(T * 0.6));
        expect((await store.renew(k, a, T)) === true, `renew ${Math.ceil(T * 0.6)} ms into a ${T} ms lease answered false: a live lease is renewed`);
        await ctx.elapse(Math.ceil(T * 0.6));
        expect((await store.acquire(k, owner('b'), ttl)) === undefined, 'the lease ended at its first ttl although renewed: renew must push its end to now + ttlMs');
        await ctx.elapse(T);
        expect((await store.acquire(k, owner('c'), ttl)) !== undefined, 'a renewed lease outlived the ttl of its renewal: renew sets the end to now + ttlMs');
        return;
      }
      // On a real clock: acquire, renew at half the ttl, look at 1.3 ttl. Whatever of the
      // kit's own waits overran the lease (a loaded machine) is not held against the store.
      for (let attempt = 0; attempt < 3; attempt++) {
        const k = key();
        const a = owner('a');
        const acquiredAt = now();
        await store.acquire(k, a, T);
        await ctx.pause(T / 2);
        const renewAt = now();
        if (renewAt - acquiredAt > T * 0.8) continue;
        const renewed = await store.renew(k, a, T);
        if (!renewed && now() - acquiredAt > T * 0.8) continue;
        expect(renewed === true, `renew ${renewAt - acquiredAt} ms into a ${T} ms lease answered false: a live lease is renewed`);
        await ctx.pause(Math.max(0, acquiredAt + T * 1.3 - now()));
        const askedAt = now();
        const other = await store.acquire(k, owner('b'), ttl);
        // The store saw the try at some instant before its answer: one that came after the
        // renewed lease could have ended proves nothing.
        if (other !== undefined && now() - renewAt > T * 0.9) continue;
        expect(other === undefined, `the lease was free ${askedAt - acquiredAt} ms after its ${T} ms acquire although renewed ${renewAt - acquiredAt} ms in: renew must push its end to now + ttlMs`);
        await store.release(k, a);
        return;
      }
      throw new StoreContractError(`the kit's own waits overran a ${T} ms lease three times: give the store a longer shortTtl`);
    },
  },
];

module.exports = { cases };
