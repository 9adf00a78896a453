'use strict';
// Permits on one key (README, "A store of your own"): `acquire(key, owner, ttl,
// { limit, weight })` holds `weight` of the key's `limit` permits. The weights held never
// sum past the limit, a key has one limit while held, each holder's lease is its own,
// and every grant's token is above every earlier one. Shared and exclusive modes are
// permits of SHARED_LIMIT: stores that keep only modes (`permits: 'modes'`) get those.
const { expect, show, SHARED_LIMIT } = require('../checked-store.cjs');

/** acquire's options for `weight` of `limit` permits, as the engine passes them. */
const permit = (limit, weight) => ({ queue: false, limit, weight });
const READER = permit(SHARED_LIMIT, 1);
const WRITER = permit(SHARED_LIMIT, SHARED_LIMIT);

/** A try's answer as a message shows it: from its token, or from checkedStore's `answer`. */
const said = (token) => (token === undefined ? 'undefined' : `{ fencingToken: ${token} }`);
const shown = (answer) => (answer.limit !== undefined ? `{ limit: ${answer.limit} }` : said(answer.token));

/** Takes `weight` of `limit` on `key` for a new owner, which must be granted: its owner and token. */
async function take(ctx, key, limit, weight, what, ttl = ctx.ttl) {
  const owner = ctx.owner(`w${weight}`);
  const token = await ctx.store.acquire(key, owner, ttl, permit(limit, weight));
  expect(token !== undefined, () => `${what} answered undefined: it fits in the key's limit and must be granted`);
  return { owner, token };
}

/** Tokens: every one above every earlier one (`tokens` in the order granted). */
function rising(tokens, what) {
  for (let i = 1; i < tokens.length; i++) {
    expect(tokens[i] > Math.max(...tokens.slice(0, i)), () => `${what}: grants got tokens ${tokens.join(', ')}: every grant's token must be above every earlier grant's on the key`);
  }
}

const cases = [
  {
    name: 'permits: the weights held never sum past the limit, and a release makes room',
    needs: 'permits',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const k = key();
      const a = await take(ctx, k, 5, 2, 'a try for 2 of 5 permits on a free key');
      const b = await take(ctx, k, 5, 2, 'a try for 2 of 5 permits while 2 were held');
      const heavy = owner('heavy');
      const over = await store.acquire(k, heavy, ttl, permit(5, 2));
      expect(over === undefined, () => `a try for 2 permits answered ${said(over)} while 4 of the key's 5 were held: the weights of the holders are summed, and never exceed the limit`);
      const c = await take(ctx, k, 5, 1, 'a try for the last 1 of 5 permits');
      const full = await store.acquire(k, owner('more'), ttl, permit(5, 1));
      expect(full === undefined, () => `a try for 1 permit answered ${said(full)} while all 5 were held: never more than the limit`);
      const again = await store.acquire(k, a.owner, ttl, permit(5, 1));
      expect(again === undefined || (ctx.caps.grants && again === a.token), () => `a try by an owner holding 2 permits answered ${said(again)}: an owner holds one permit of a key at most, a second try is refused`);
      await store.release(k, a.owner);
      const d = await take(ctx, k, 5, 2, "a try for 2 permits after a holder of 2 released (3 of 5 held)");
      rising([a.token, b.token, c.token, d.token], 'permits of one key');
      for (const holder of [b, c, d]) await store.release(k, holder.owner);
    },
  },
  {
    name: 'mode: readers hold a key together, a writer alone, each under a larger token',
    needs: 'modes',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const k = key();
      const readers = [owner('reader'), owner('reader'), owner('reader')];
      const tokens = [];
      for (const [i, reader] of readers.entries()) {
        const token = await store.acquire(k, reader, ttl, READER);
        expect(token !== undefined, `reader ${i + 1} was refused while only readers held the key: shared holders run together`);
        tokens.push(token);
      }
      const writer = owner('writer');
      const early = await store.acquire(k, writer, ttl, WRITER);
      expect(early === undefined, () => `a writer's try answered ${said(early)} while 3 readers held the key: a writer holds it alone`);
      for (const reader of readers.slice(0, 2)) await store.release(k, reader);
      const stillOne = await store.acquire(k, writer, ttl, WRITER);
      expect(stillOne === undefined, () => `a writer's try answered ${said(stillOne)} while 1 reader held the key: a writer waits for every reader`);
      await store.release(k, readers[2]);
      const written = await store.acquire(k, writer, ttl, WRITER);
      expect(written !== undefined, "a writer's try on a key nobody held any more was refused: the readers' releases must free it");
      tokens.push(written);
      const reader = owner('late-reader');
      const late = await store.acquire(k, reader, ttl, READER);
      expect(late === undefined, () => `a reader's try answered ${said(late)} while a writer held the key: a writer holds it alone`);
      const second = await store.acquire(k, owner('writer'), ttl, WRITER);
      expect(second === undefined, () => `a second writer's try answered ${said(second)} while a writer held the key: a writer holds it alone`);
      await store.release(k, writer);
      const after = await store.acquire(k, reader, ttl, READER);
      expect(after !== undefined, "a reader was refused after the writer's release: the key must be free");
      tokens.push(after);
      rising(tokens, 'readers, a writer, a reader');
      await store.release(k, reader);
    },
  },
  {
    name: 'mode: a plain try on a shared key, and a reader on a plainly held key, are answered { limit }',
    needs: 'modes',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const shared = key('shared');
      const reader = owner('reader');
      await store.acquire(shared, reader, ttl, READER);
      const plain = await store.answer(shared, owner('plain'), ttl);
      expect(plain.limit === SHARED_LIMIT, () => `a plain try on a key held by a reader answered ${shown(plain)}: it must answer { limit: ${SHARED_LIMIT} } (the key's limit; a plain lease is limit 1)`);
      const plainKey = key('plain');
      const holder = owner('holder');
      await store.acquire(plainKey, holder, ttl);
      const read = await store.answer(plainKey, owner('reader'), ttl, READER);
      expect(read.limit === 1, () => `a reader's try on a plainly held key answered ${shown(read)}: it must answer { limit: 1 } (the key's limit)`);
      await store.release(shared, reader);
      await store.release(plainKey, holder);
    },
  },
  {
    name: "permits: a key has one limit while held; a try with another is answered { limit: <the key's> }",
    needs: 'permits',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const tries = [
        [3, undefined, 'a plain try on a key held with limit 3'],
        [3, 4, 'a try with limit 4 on a key held with limit 3'],
        [4, 3, 'a try with limit 3 on a key held with limit 4'],
        [undefined, 3, 'a try with limit 3 on a plainly held key'],
      ];
      for (const [held, asked, what] of tries) {
        const k = key();
        const holder = owner('holder');
        const token = await store.acquire(k, holder, ttl, held === undefined ? undefined : permit(held, 1));
        expect(token !== undefined, `the first try on a free key was refused (${what})`);
        const late = owner('other-limit');
        const answer = await store.answer(k, late, ttl, asked === undefined ? undefined : permit(asked, 1));
        expect(answer.limit === (held ?? 1), () => `${what} answered ${shown(answer)}: limits agree on a key, the try must answer { limit: ${held ?? 1} } (the key's limit), never be granted or queued`);
        expect((await store.renew(k, late, ttl)) === false, `${what} left its owner holding the key: a { limit } answer grants nothing`);
        expect((await store.renew(k, holder, ttl)) === true, `${what} ended the holder's lease: a { limit } answer leaves the key alone`);
        await store.release(k, holder);
        const fresh = await store.answer(k, late, ttl, asked === undefined ? undefined : permit(asked, 1));
        expect(fresh.token !== undefined, () => `the same try once the key was free answered ${shown(fresh)}: a key with no holders takes any limit`);
        await store.release(k, late);
      }
    },
  },
  {
    name: "permits: renew and release act on their owner's permit alone",
    needs: 'permits',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const k = key();
      const [a, b, c] = [await take(ctx, k, 3, 1, 'permit 1 of 3'), await take(ctx, k, 3, 1, 'permit 2 of 3'), await take(ctx, k, 3, 1, 'permit 3 of 3')];
      const stranger = owner('stranger');
      expect((await store.renew(k, stranger, ttl)) === false, 'renew by an owner holding no permit answered true: renew checks the owner');
      expect((await store.release(k, stranger)) !== true, 'release by an owner holding no permit answered true: release checks the owner');
      expect((await store.acquire(k, owner('more'), ttl, permit(3, 1))) === undefined, "release by an owner holding no permit freed one of the key's permits");
      expect((await store.renew(k, b.owner, ttl)) === true, 'renew by one of three holders answered false: each holder renews its own permit');
      expect((await store.release(k, b.owner)) !== false, 'release by one of three holders answered false: it held a live permit');
      for (const other of [a, c]) {
        expect((await store.renew(k, other.owner, ttl)) === true, "a holder's renew answered false after another holder's release: a release ends only its owner's permit");
      }
      expect((await store.renew(k, b.owner, ttl)) === false, 'renew after its owner released its permit answered true: a released permit cannot be renewed');
      const d = await take(ctx, k, 3, 1, 'a try after one of three holders released');
      expect((await store.release(k, b.owner)) !== true, "a second release by a holder that had released answered true: that permit is no longer theirs");
      expect((await store.acquire(k, owner('more'), ttl, permit(3, 1))) === undefined, 'a second release by a holder that had released freed a permit of another holder');
      for (const holder of [a, c, d]) await store.release(k, holder.owner);
    },
  },
  {
    name: "permits: a lapsed holder's permits return; the other holders keep theirs",
    needs: 'permits',
    async run(ctx) {
      const { store, key, owner, ttl, shortTtl } = ctx;
      const k = key();
      const lapsing = await take(ctx, k, 3, 2, 'a try for 2 of 3 permits on a free key', shortTtl);
      const keeper = await take(ctx, k, 3, 1, 'a try for the last 1 of 3 permits');
      const next = owner('next');
      if (ctx.fake) {
        await ctx.elapse(shortTtl - 1);
        expect((await store.acquire(k, next, ttl, permit(3, 2))) === undefined, `2 permits were free ${shortTtl - 1} ms into a ${shortTtl} ms ttl: a permit lasts its ttl`);
        await ctx.elapse(1);
      }
      const token = await ctx.eventually(`the 2 permits of a holder whose ${shortTtl} ms ttl ran out never came free: a lapsed holder's permits return`, () =>
        store.acquire(k, next, ttl, permit(3, 2)),
      );
      expect(token > keeper.token, `the grant after a lapse got token ${token}, not above the earlier grants' (${lapsing.token}, ${keeper.token})`);
      expect((await store.renew(k, keeper.owner, ttl)) === true, "another holder's lapse ended a live holder's permit: each permit lapses on its own ttl");
      expect((await store.renew(k, lapsing.owner, ttl)) === false, 'renew by a holder whose permit lapsed answered true: its permits went to another');
      await store.release(k, lapsing.owner);
      expect((await store.acquire(k, owner('more'), ttl, permit(3, 1))) === undefined, "release by a holder whose permit lapsed freed another holder's permits");
      await store.release(k, keeper.owner);
      await store.release(k, next);
    },
  },
  {
    name: 'permits: every grant on a key gets a larger token, across weights, limits and holders',
    needs: 'permits',
    async run(ctx) {
      const { store, key } = ctx;
      const k = key();
      const tokens = [];
      const holders = [];
      // Holders overlapping and not, then the key freed and used with other limits.
      for (const [limit, weights] of [[4, [1, 3, 2, 2, 1]], [undefined, [1, 1]], [2, [2, 1, 1]]]) {
        for (const weight of weights) {
          if (limit === undefined) {
            const o = ctx.owner('plain');
            const token = await store.acquire(k, o, ctx.ttl);
            expect(token !== undefined, 'a plain try on a key nobody held was refused');
            tokens.push(token);
            await store.release(k, o);
            continue;
          }
          // Make room: release the oldest holders until `weight` fits.
          while (holders.reduce((sum, h) => sum + h.weight, 0) + weight > limit) await store.release(k, holders.shift().owner);
          const { owner, token } = await take(ctx, k, limit, weight, `a try for ${weight} of ${limit} permits that fit`);
          tokens.push(token);
          holders.push({ owner, weight });
        }
        while (holders.length > 0) await store.release(k, holders.shift().owner);
      }
      rising(tokens, 'permits of weights 1 to 3, limits 4, 1 and 2');
    },
  },
  {
    name: 'permits: a bad limit or weight is refused with a TypeError or RangeError, granting nothing',
    needs: 'permits',
    async run(ctx) {
      const { store, key, owner, ttl } = ctx;
      const k = key();
      const o = owner('a');
      const bad = [
        [{ limit: 0, weight: 1 }, 'a limit of 0'],
        [{ limit: 3, weight: 0 }, 'a weight of 0'],
        [{ limit: 3, weight: 4 }, 'a weight above the limit'],
        [{ limit: 2.5, weight: 1 }, 'a limit that is not an integer'],
        [{ limit: '3', weight: 1 }, 'a limit that is a string'],
        [{ limit: 3, weight: -1 }, 'a negative weight'],
        [{ limit: SHARED_LIMIT + 1, weight: 1 }, `a limit above ${SHARED_LIMIT}`],
        [{ limit: 3 }, 'a limit without a weight'],
        [{ weight: 1 }, 'a weight without a limit'],
      ];
      for (const [options, what] of bad) {
        const { name, value, error } = await store.call('acquire', k, o, ttl, { queue: false, ...options });
        expect(
          error instanceof TypeError || error instanceof RangeError,
          () =>
            error === undefined
              ? `${name} (${what}) resolved to ${show(value)}: a store must refuse ${what} with a TypeError or RangeError`
              : `${name} (${what}) failed with ${error && error.name}: ${error && error.message}; bad options are a TypeError or RangeError`,
        );
      }
      const token = await store.acquire(k, o, ttl, permit(3, 3));
      expect(token !== undefined, 'all 3 permits of the key were not free after tries with bad options: a refused call grants nothing');
      await store.release(k, o);
    },
  },
];

module.exports = { cases, permit, READER, WRITER, said, rising };
