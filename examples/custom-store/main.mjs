// The Map store used through a pipeline: three tasks want the same key at once and
// take turns, then a fail-fast call is rejected while the key is held. Then permits:
// four exports with `limit: 2` run two at a time.
//
//   node main.mjs
import { setTimeout as sleep } from 'node:timers/promises';
import { ResiliencePipelineBuilder, LockNotAcquiredError, getLockToken } from 'leasehold';
import { MapLockStore } from './map-store.mjs';

const store = new MapLockStore();
const waiting = new ResiliencePipelineBuilder().addLock({ key: 'report', store, ttl: '2s', wait: '5s' }).build();
const failFast = new ResiliencePipelineBuilder().addLock({ key: 'report', store, ttl: '2s' }).build();

let inside = 0;
const tokens = [];
async function task(name) {
  await waiting.execute(async () => {
    inside += 1;
    const token = getLockToken();
    tokens.push(token);
    console.log(`${name}: holds 'report' with token ${token} (holders now: ${inside})`);
    await sleep(100);
    inside -= 1;
  });
}

const running = Promise.all(['task 1', 'task 2', 'task 3'].map(task));
await sleep(20);
try {
  await failFast.execute(() => console.log('fail-fast: ran (unexpected)'));
} catch (error) {
  if (!(error instanceof LockNotAcquiredError)) throw error;
  console.log(`fail-fast: ${error.code}, the key is held`);
}
await running;

const increasing = tokens.every((t, i) => i === 0 || t > tokens[i - 1]);
console.log(`tokens in holding order: ${tokens.join(', ')} (${increasing ? 'increasing' : 'NOT increasing'})`);
console.log(`after the last release: locked = ${await store.isLocked('report')}`);

const exporting = new ResiliencePipelineBuilder().addLock({ key: 'export', store, ttl: '2s', wait: '5s', limit: 2 }).build();
let exports = 0;
let most = 0;
const exportTokens = [];
await Promise.all(
  [1, 2, 3, 4].map(() =>
    exporting.execute(async () => {
      most = Math.max(most, ++exports);
      exportTokens.push(getLockToken());
      await sleep(50);
      exports -= 1;
    }),
  ),
);
console.log(`exports: 4 ran with limit 2, at most ${most} at once, tokens ${exportTokens.join(', ')}`);
