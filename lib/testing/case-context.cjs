'use strict';
// What one case of the kit works with: the checked store, fresh keys and owners, and
// time, fake (the store runs on a clock the kit advances) or real (the store keeps its
// own clock, a server's: the kit waits, briefly, and its bounds only catch hangs).
const { StoreContractError, checkedStore, sleep } = require('./checked-store.cjs');

/**
 * What the store declares it can do, read from the store when the case runs; `declared`
 * (the `capabilities` option) overrides it. A new capability (inspection, say) is read
 * here, named in kit.cjs's CAPABILITIES, and its cases say `needs: '<name>'`.
 * `permits` is true (limit, weight and mode), 'modes' (shared and exclusive only) or
 * false; `modes` follows from it.
 */
function capabilitiesOf(store, declared) {
  const subscribes = typeof store.subscribe === 'function';
  const grants = subscribes && store.grantsOnRelease === true;
  const caps = {
    subscribe: subscribes,
    grants,
    announces: subscribes && !grants,
    localHandoff: store.localHandoff !== undefined && store.localHandoff !== null,
    permits: store.permits === true || store.permits === 'modes' ? store.permits : false,
    ...declared,
  };
  caps.modes = caps.permits === true || caps.permits === 'modes';
  // The permit cases ask for `permits` meaning all of them: limit and weight.
  caps.permits = caps.permits === true;
  return caps;
}

/** Whether `caps` has what a case `needs`: one capability's name, or a list of them. */
function hasAll(caps, needs) {
  return [].concat(needs).every((need) => caps[need]);
}

let runs = 0;
const random = () => Math.random().toString(36).slice(2, 8);

/** Lets promise chains and the store's callbacks run after fake time moved. */
async function flush() {
  for (let i = 0; i < 3; i++) await sleep(0);
}

/**
 * The context of one case on `store`. `settings`: the kit's options read once
 * (lib/testing/kit.cjs): `clock`, `ttl`, `shortTtl`, `timeout`, `leasehold`, `capabilities`.
 */
function caseContext(store, settings, caseName) {
  const run = `kit${++runs}${random()}`;
  const { clock } = settings;
  let keys = 0;
  const ctx = {
    raw: store,
    store: checkedStore(store, settings.callTimeout),
    caps: capabilitiesOf(store, settings.capabilities),
    clock,
    fake: clock !== undefined,
    /** A lease long enough to never end during a case. */
    ttl: settings.ttl,
    /** A lease the expiry cases let end: on fake time exact, on a real clock short. */
    shortTtl: settings.shortTtl,
    /** The ttl of the lease the engine renews in the renewal case (real clocks). */
    renewTtl: settings.renewTtl,
    timeout: settings.timeout,
    get api() {
      return settings.leasehold();
    },
    /** A key no other case or run uses (stores on servers keep their keys between runs). */
    key: (label = 'key') => `${run}:${caseName.split(' ')[0]}:${label}-${++keys}`,
    owner: (label) => `${label}-${random()}`,
    /** Lets `ms` pass: fake time is advanced, a real clock waited for. */
    async elapse(ms) {
      if (!clock) return sleep(ms);
      // In steps, with the store's answers let in between: an engine on this clock sees
      // its renewals answered when they would be, not after one long jump.
      await flush();
      for (let left = ms; left > 0; left -= 50) {
        clock.advance(Math.min(50, left));
        await flush();
      }
      return undefined;
    },
    /**
     * Asks `check` until it answers something truthy (that is returned), letting time
     * pass between asks; fails with `what` after `bound` ms (fake time: as many steps).
     */
    async eventually(what, check, bound = settings.timeout / 2) {
      const step = clock ? 25 : 20;
      for (let waited = 0; ; ) {
        const answer = await check();
        if (answer) return answer;
        if (waited >= bound) throw new StoreContractError(`${what} (waited ${bound} ms)`);
        const by = clock ? step : Math.min(step * 2 ** Math.floor(waited / 500), 200);
        await ctx.elapse(by);
        waited += by;
      }
    },
    /** Sleeps real time even on a fake clock: answers and messages that travel. */
    pause: sleep,
  };
  return ctx;
}

module.exports = { caseContext, capabilitiesOf, hasAll, flush };
