'use strict';
// The three methods every store has (README, "A store of your own"): a lease is its
// owner's alone, its tokens only rise, keys are apart, and nonsense is refused.
const { expect } = require('../checked-store.cjs');

const README = '(README, "A store of your own")';

const cases = [
  {
    name: 'acquire grants a free key with a fencing token, and refuses a held key to everyone, its holder included',
    async run({ store, key, owner, ttl, caps }) {
      const k = key();
      const a = owner('a');
      const b = owner('b');
      const token = await store.acquire(k, a, ttl);
      expect(token !== undefined, `acquire(${JSON.stringify(k)}, …) of a key nobody holds answered undefined: a free key must be granted`);
      const other = await store.acquire(k, b, ttl);
      expect(other === undefined, `acquire by a second owner of a held key answered { fencingToken: ${other} }: a held key must be refused (undefined) until its lease ends`);
      const again = await store.acquire(k, a, ttl);
      // A granting store may answer its holder's try with the lease it holds (a try after
      // a grant is answered so), never with a new one.
      const same = caps.grants && again === token;
      expect(again === undefined || same, `acquire by the holder of a held key answered { fencingToken: ${again} }: leases are not reentrant, a held key is refused to its own owner too ${README}`);
      await store.release(k, a);
    },
  },
  {
    name: 'renew succeeds only for the owner of the live lease',
    async run({ store, key, owner, ttl }) {
      const k = key();
      const a = owner('a');
      const b = owner('b');
      await store.acquire(k, a, ttl);
      const stolen = await store.renew(k, b, ttl);
      expect(stolen === false, `renew by an owner that does not hold the lease answered ${stolen}: renew must check the owner and answer false`);
      expect((await store.acquire(k, b, ttl)) === undefined, "renew by another owner took the lease from its holder: it must leave someone else's lease alone");
      const renewed = await store.renew(k, a, ttl);
      expect(renewed === true, `renew by the holder of a live lease answered ${renewed}: it must answer true`);
      await store.release(k, a);
      const late = await store.renew(k, a, ttl);
      expect(late === false, `renew after the owner released the lease answered ${late}: a released lease cannot be renewed`);
      const next = await store.acquire(k, b, ttl);
      expect(next !== undefined, 'renew after release brought the lease back to life: the key must stay free');
      await store.release(k, b);
    },
  },
  {
    name: "release ends only its owner's lease",
    async run({ store, key, owner, ttl }) {
      const k = key();
      const a = owner('a');
      const b = owner('b');
      const c = owner('c');
      await store.acquire(k, a, ttl);
      const foreign = await store.release(k, b);
      expect(foreign !== true, 'release by an owner that does not hold the lease answered true: release must check the owner');
      const taken = await store.acquire(k, c, ttl);
      expect(taken === undefined, "release by an owner that does not hold the lease freed the key: release must end only its owner's lease");
      expect((await store.renew(k, a, ttl)) === true, "the holder's renew failed after another owner's release: that release must leave the lease alone");
      const own = await store.release(k, a);
      expect(own !== false, "the holder's release of its live lease answered false: it must answer true (or nothing)");
      const after = await store.acquire(k, c, ttl);
      expect(after !== undefined, "the key was still held after its holder's release: release must free it");
      const twice = await store.release(k, a);
      expect(twice !== true, 'a second release by the old owner answered true: the lease is no longer theirs');
      expect((await store.acquire(k, b, ttl)) === undefined, "a second release by the old owner freed the new holder's lease");
      await store.release(k, c);
    },
  },
  {
    name: 'fencing tokens only rise on a key, across owners and releases',
    async run({ store, key, owner, ttl }) {
      const k = key();
      let last = -1;
      for (let i = 0; i < 5; i++) {
        const o = owner(`o${i}`);
        const token = await store.acquire(k, o, ttl);
        expect(token !== undefined, `grant ${i + 1} of a released key answered undefined: a released key must be free`);
        expect(token > last, `grant ${i + 1} of the key got token ${token}, not above the previous grant's ${last}: tokens must only rise per key`);
        last = token;
        await store.release(k, o);
      }
    },
  },
  {
    name: 'keys are independent',
    async run({ store, key, owner, ttl }) {
      const k1 = key('one');
      const k2 = key('two');
      const a = owner('a');
      const b = owner('b');
      await store.acquire(k1, a, ttl);
      const t2 = await store.acquire(k2, b, ttl);
      expect(t2 !== undefined, 'a key was refused while only another key was held: leases are per key');
      await store.release(k1, a);
      expect((await store.acquire(k2, a, ttl)) === undefined, "releasing one key freed another key's lease");
      expect((await store.renew(k2, b, ttl)) === true, "releasing one key ended another key's lease");
      await store.release(k2, b);
    },
  },
  {
    name: 'refuses a bad key, owner or ttl with a TypeError or RangeError, granting nothing',
    async run({ store, key, owner, ttl }) {
      const k = key();
      const o = owner('a');
      const bad = [
        ['acquire', ['', o, ttl], 'an empty key'],
        ['acquire', [42, o, ttl], 'a key that is not a string'],
        ['acquire', [k, '', ttl], 'an empty owner'],
        ['acquire', [k, undefined, ttl], 'a missing owner'],
        ['acquire', [k, o, 0], 'a ttl of 0'],
        ['acquire', [k, o, -1000], 'a negative ttl'],
        ['acquire', [k, o, Number.NaN], 'a ttl of NaN'],
        ['acquire', [k, o, Number.POSITIVE_INFINITY], 'an infinite ttl'],
        ['acquire', [k, o, String(ttl)], 'a ttl that is a string'],
        ['renew', [k, o, 0], 'a ttl of 0'],
        ['renew', ['', o, ttl], 'an empty key'],
        ['release', ['', o], 'an empty key'],
        ['release', [k, ''], 'an empty owner'],
      ];
      for (const [method, args, what] of bad) {
        const { name, value, error } = await store.call(method, ...args);
        expect(
          error instanceof TypeError || error instanceof RangeError,
          () =>
            error === undefined
              ? `${name} (${what}) resolved to ${JSON.stringify(value)}: a store must refuse ${what} with a TypeError or RangeError`
              : `${name} (${what}) failed with ${error && error.name}: ${error && error.message}; bad arguments are a TypeError or RangeError`,
        );
      }
      const token = await store.acquire(k, o, ttl);
      expect(token !== undefined, 'the key was held after acquires with bad arguments: a refused call must grant nothing');
      await store.release(k, o);
    },
  },
];

module.exports = { cases };
