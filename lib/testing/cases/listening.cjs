'use strict';
// A store's `subscribe` listener as the kit hears it, and one handover of a key from a
// holder to a queued owner: what the grant and announcement cases are made of.
const { expect, show, isToken } = require('../checked-store.cjs');

const QUEUE = Object.freeze({ queue: true });
const NO_QUEUE = Object.freeze({ queue: false });

/**
 * Subscribes to `key` with a listener that records every call (`calls`: the grant, or
 * undefined for a plain announcement, and whether it came inside a `release` call of the
 * kit) and claims a grant when `claims(grant)` says so (default: never).
 */
function listen(ctx, key) {
  const rec = { calls: [], claims: () => false, releasing: false };
  expect(typeof ctx.raw.subscribe === 'function', 'the store is held to grants or announcements (capabilities) but has no subscribe method');
  rec.off = ctx.raw.subscribe(key, (grant) => {
    rec.calls.push({ grant, inRelease: rec.releasing });
    return grant !== undefined && rec.claims(grant) === true;
  });
  expect(typeof rec.off === 'function', () => `subscribe(key, listener) returned ${show(rec.off)}: it must return the function that removes the listener`);
  rec.grantsTo = (owner) => rec.calls.filter((c) => c.grant && c.grant.owner === owner);
  /** Releases through the store, marking listener calls made before `release` returned. */
  rec.release = async (key2, owner) => {
    rec.releasing = true;
    let pending;
    try {
      pending = ctx.store.release(key2, owner);
    } finally {
      rec.releasing = false;
    }
    return pending;
  };
  /** The first grant to `owner`, waiting up to `ms` of real time for it. */
  rec.grantFor = async (owner, ms) => {
    for (let waited = 0; ; waited += 10) {
      const [call] = rec.grantsTo(owner);
      if (call || waited >= ms) return call;
      await ctx.pause(10);
    }
  };
  return rec;
}

/** Checks a grant's shape: `{ owner, fencingToken, age? }`, its token above `above`. */
function checkGrant(call, owner, above) {
  const { grant } = call;
  expect(!call.inRelease, 'a grant was offered inside the release call that made it: offer grants from a later turn (README, "A store of your own")');
  expect(isToken(grant.fencingToken), () => `the grant ${show(grant)} has no fencingToken: a grant is { owner, fencingToken, age? }`);
  expect(grant.fencingToken > above, `the grant's token ${grant.fencingToken} is not above the releasing holder's ${above}: tokens must only rise`);
  expect(
    grant.age === undefined || (typeof grant.age === 'number' && grant.age >= 0 && Number.isFinite(grant.age)),
    () => `the grant's age ${show(grant.age)} is not a non-negative number of ms (leave it out when unknown)`,
  );
  expect(grant.owner === owner, `the grant went to ${show(grant.owner)}, not to the queued owner ${show(owner)}`);
}

/**
 * One handover: a holder takes `key`, `waiter` queues, the holder releases. Answers how
 * the waiter learned of its lease: `{ grant }` through the listener (claimed when
 * `rec.claims` says so), or `{ token }` from its next try, when no grant reached the
 * listener in `hearMs` (a subscription still being opened loses the message; the try
 * finds the lease handed over).
 */
async function handOver(ctx, rec, key, waiter, hearMs = 1000) {
  const { store, owner, ttl } = ctx;
  const holder = owner('holder');
  const held = await ctx.eventually('the key was never free for the next handover', () => store.acquire(key, holder, ttl));
  const queued = await store.acquire(key, waiter, ttl, QUEUE);
  expect(queued === undefined, `a queued try on a held key answered { fencingToken: ${queued} }: the key is held, the try must answer undefined`);
  await rec.release(key, holder);
  const call = await rec.grantFor(waiter, hearMs);
  if (call) {
    checkGrant(call, waiter, held);
    return { held, grant: call.grant };
  }
  const token = await ctx.eventually(
    "the holder's release handed the lease neither through subscribe's listener nor to the queued owner's next try",
    () => store.acquire(key, waiter, ttl, QUEUE),
  );
  return { held, token };
}

module.exports = { QUEUE, NO_QUEUE, listen, checkGrant, handOver };
