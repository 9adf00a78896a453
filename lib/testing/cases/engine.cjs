'use strict';
// The store used as users use it: under the engine, through pipelines. Executions on a
// key never overlap, each runs under a larger token, a fail-fast execution on a held key
// is refused, and the engine keeps a lease past its ttl by renewing it.
const { expect, within } = require('../checked-store.cjs');

/** Resolves with `promise`'s outcome; on fake time, advances the clock until it settles. */
async function settle(ctx, promise, what) {
  let done = false;
  const outcome = promise.then(
    (value) => ({ value }),
    (error) => ({ error }),
  );
  outcome.then(() => (done = true));
  if (ctx.fake) {
    for (let waited = 0; !done && waited < ctx.timeout; waited += 25) await ctx.elapse(25);
  }
  return within(ctx.timeout, what, outcome);
}

function builder(ctx) {
  return new ctx.api.ResiliencePipelineBuilder(ctx.fake ? { timeProvider: ctx.clock } : {});
}

const cases = [
  {
    name: 'through the engine: executions on one key take turns, each under a larger token',
    async run(ctx) {
      const { getLockToken } = ctx.api;
      const key = ctx.key();
      const pipeline = builder(ctx).addLock({ key, store: ctx.raw, ttl: ctx.ttl, wait: ctx.timeout }).build();
      let inside = 0;
      const overlaps = [];
      const tokens = [];
      const runs = Array.from({ length: 4 }, (_, i) =>
        pipeline.execute(async (context) => {
          inside += 1;
          if (inside > 1) overlaps.push(i);
          tokens.push(getLockToken(context));
          await ctx.pause(5);
          inside -= 1;
        }),
      );
      const outcome = await settle(ctx, Promise.all(runs), 'four executions on one key');
      if (outcome.error) throw outcome.error;
      expect(overlaps.length === 0, `two executions held the key at once (execution ${overlaps[0]} ran while another held it): a store must refuse a held key`);
      for (let i = 1; i < tokens.length; i++) {
        expect(tokens[i] > tokens[i - 1], `executions ran under tokens ${tokens.join(', ')}: each holder's token must be above every earlier one`);
      }
    },
  },
  {
    name: 'through the engine: a fail-fast execution is refused while the key is held, and runs once it is free',
    async run(ctx) {
      const { LockNotAcquiredError } = ctx.api;
      const key = ctx.key();
      const lock = { key, store: ctx.raw, ttl: ctx.ttl };
      const holding = builder(ctx).addLock(lock).build();
      const failFast = builder(ctx).addLock(lock).build();
      let letGo;
      let held;
      const gate = new Promise((resolve) => (letGo = resolve));
      const heldNow = new Promise((resolve) => (held = resolve));
      const holder = holding.execute(async () => {
        held();
        await gate;
      });
      holder.catch(() => {}); // its failure is read below, or the case has failed already
      const first = await settle(ctx, Promise.race([heldNow, holder]), 'the first execution to hold the key');
      if (first.error) throw first.error;
      let ran = false;
      const refused = await settle(ctx, failFast.execute(() => (ran = true)), 'a fail-fast execution on a held key');
      expect(!ran && refused.error instanceof LockNotAcquiredError, () => `a fail-fast execution on a held key ${ran ? 'ran' : `settled with ${refused.error}`}: the store must refuse a held key`);
      letGo();
      const released = await settle(ctx, holder, 'the holding execution');
      if (released.error) throw released.error;
      const after = await settle(ctx, failFast.execute(() => 'ran'), 'a fail-fast execution after the release');
      expect(after.value === 'ran', () => `a fail-fast execution right after the holder settled failed (${after.error}): a release must free the key`);
    },
  },
  {
    name: 'through the engine: a lease renewed every ttl/3 outlives its ttl',
    async run(ctx) {
      const { LockNotAcquiredError } = ctx.api;
      const key = ctx.key();
      const ttl = ctx.fake ? 3000 : ctx.renewTtl;
      const lock = { key, store: ctx.raw, ttl };
      let lost;
      let letGo;
      let held;
      const gate = new Promise((resolve) => (letGo = resolve));
      const heldNow = new Promise((resolve) => (held = resolve));
      const holder = builder(ctx)
        .addLock(lock)
        .build()
        .execute(async ({ signal }) => {
          held();
          signal.addEventListener('abort', () => (lost = signal.reason));
          await gate;
        });
      holder.catch(() => {}); // its failure is read below, or the case has failed already
      const first = await settle(ctx, Promise.race([heldNow, holder]), 'the execution to hold the key');
      if (first.error) throw first.error;
      await ctx.elapse(Math.round(ttl * 1.6));
      let ran = false;
      const other = await settle(ctx, builder(ctx).addLock(lock).build().execute(() => (ran = true)), 'a fail-fast execution');
      letGo();
      const outcome = await settle(ctx, holder, 'the renewed execution');
      expect(lost === undefined && outcome.error === undefined, () => `the lease was lost while the engine renewed it every ttl/3 (${lost || outcome.error}): renew must push the lease's end to now + ttlMs`);
      expect(!ran && other.error instanceof LockNotAcquiredError, 'the key was free past the first ttl of a lease the engine kept renewing: renew must keep the lease');
    },
  },
];

module.exports = { cases, settle, builder };
