'use strict';
// Permits under the engine, through pipelines: executions with `limit` run together up
// to the limit (weights summed) and never past it, a plain lock on such a key fails with
// LockLimitMismatchError, readers run together and a writer alone, first come first.
const { expect, SHARED_LIMIT } = require('../checked-store.cjs');
const { settle, builder } = require('./engine.cjs');

/** A promise and the function that resolves it. */
function latch() {
  let open;
  const promise = new Promise((resolve) => (open = resolve));
  return { promise, open };
}

const cases = [
  {
    name: 'through the engine: executions with { limit: 3 } run up to 3 permits at once, weights summed, never more',
    needs: 'permits',
    async run(ctx) {
      const { getLockToken, LockLimitMismatchError } = ctx.api;
      const key = ctx.key();
      const bound = ctx.timeout / 4;
      const lock = { key, store: ctx.raw, ttl: ctx.ttl, wait: ctx.timeout, limit: 3 };
      const full = latch();
      const letGo = latch();
      let used = 0;
      let most = 0;
      const over = [];
      const tokens = [];
      const run = (weight) => {
        const execution = builder(ctx)
          .addLock({ ...lock, weight })
          .build()
          .execute(async (context) => {
            used += weight;
            most = Math.max(most, used);
            if (used > 3) over.push(used);
            if (used === 3) full.open(true);
            tokens.push(getLockToken(context));
            // The first three wait until the plain lock below was refused (bounded: a store
            // that lets fewer in must not hang the case).
            await Promise.race([letGo.promise, ctx.pause(bound)]);
            used -= weight;
          });
        execution.catch(() => {}); // read below, through Promise.all
        return execution;
      };
      const runs = [1, 1, 1].map(run);
      const three = await settle(ctx, Promise.race([full.promise, ctx.pause(bound).then(() => false)]), 'three executions with limit 3');
      let plain;
      if (three.value) plain = await settle(ctx, builder(ctx).addLock({ key, store: ctx.raw, ttl: ctx.ttl }).build().execute(() => 'ran'), 'a plain execution on the key');
      // Heavier ones wait for room while the three hold the key.
      runs.push(...[2, 1, 3].map(run));
      const all = Promise.all(runs);
      await ctx.pause(10);
      letGo.open();
      const outcome = await settle(ctx, all, 'six executions with limit 3');
      if (outcome.error) throw outcome.error;
      expect(three.value === true, `three executions with limit 3 and weight 1 were never inside at once (at most ${most}): a store grants a key's permits to several holders`);
      expect(tokens.length === 6, `${tokens.length} of 6 executions with limit 3 ran`);
      expect(over.length === 0, `executions with limit 3 held ${over[0]} permits at once: the weights of the holders are summed and never exceed the limit`);
      expect(plain?.error instanceof LockLimitMismatchError, () => `a plain execution on a key held with limit 3 ${plain.error ? `failed with ${plain.error}` : 'ran'}: the store answers { limit: 3 }, and the engine fails it with LockLimitMismatchError`);
      expect(new Set(tokens).size === tokens.length, `executions with limit 3 ran under tokens ${tokens.join(', ')}: every holder gets a token of its own`);
    },
  },
  {
    name: 'through the engine: readers run together, a writer alone, under a token above theirs',
    needs: 'modes',
    async run(ctx) {
      const { getLockToken } = ctx.api;
      const key = ctx.key();
      const bound = ctx.timeout / 4;
      const pipeline = (mode) => builder(ctx).addLock({ key, store: ctx.raw, ttl: ctx.ttl, wait: ctx.timeout, mode }).build();
      const both = latch();
      const letGo = latch();
      let readers = 0;
      let writing = false;
      const seen = [];
      const read = (name) =>
        pipeline('shared').execute(async (context) => {
          readers += 1;
          seen.push({ name, token: getLockToken(context), readers, writing });
          if (readers === 2) both.open(true);
          await Promise.race([letGo.promise, ctx.pause(bound)]);
          readers -= 1;
        });
      const first = [read('reader 1'), read('reader 2')];
      for (const execution of first) execution.catch(() => {}); // read below, through Promise.all
      const together = await settle(ctx, Promise.race([both.promise, ctx.pause(bound).then(() => false)]), 'two readers');
      const writer = pipeline('exclusive').execute(async (context) => {
        writing = true;
        seen.push({ name: 'the writer', token: getLockToken(context), readers, writing: false });
        await ctx.pause(5);
        writing = false;
      });
      if (ctx.caps.grants) {
        // The writer's try queues it (it will wait): a reader's try is refused from then on.
        await ctx.eventually("a reader's try was still granted while the writer waited: a waiting writer's try (queue: true) queues it, and nobody overtakes it", async () => {
          const probe = ctx.owner('probe');
          const token = await ctx.store.acquire(key, probe, ctx.ttl, { queue: false, limit: SHARED_LIMIT, weight: 1 });
          if (token !== undefined) await ctx.store.release(key, probe);
          return token === undefined;
        }, bound);
      }
      const later = read('the later reader');
      for (const execution of [writer, later]) execution.catch(() => {}); // read below
      await ctx.pause(20);
      letGo.open();
      const outcome = await settle(ctx, Promise.all([...first, writer, later]), 'two readers, a writer and a later reader');
      if (outcome.error) throw outcome.error;
      expect(together.value === true, 'two readers were never inside at once: shared holders run together');
      const names = seen.map((s) => s.name);
      const w = names.indexOf('the writer');
      expect(seen[w].readers === 0, `the writer ran while ${seen[w].readers} reader(s) were inside: a writer runs alone`);
      expect(!seen[names.indexOf('the later reader')].writing, 'a reader ran while the writer was inside: a writer runs alone');
      // A store that grants on release queues the writer: no later try is granted ahead of
      // it. A polling store's tries are not ordered by the store.
      if (ctx.caps.grants) {
        expect(names.indexOf('the later reader') > w, 'a reader that came after the waiting writer ran before it: a queued writer is not overtaken (FIFO)');
      }
      const late = seen[names.indexOf('the later reader')];
      expect(late.token > Math.max(seen[0].token, seen[1].token), `the later reader's token ${late.token} is not above the first readers' (${seen[0].token}, ${seen[1].token})`);
      expect(seen[w].token > Math.max(seen[0].token, seen[1].token), `the readers and the writer ran under tokens ${seen.map((s) => s.token).join(', ')}: the writer's token is above every reader's before it`);
    },
  },
];

module.exports = { cases };
