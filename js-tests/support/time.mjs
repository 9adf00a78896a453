// Helpers for tests on FakeTimeProvider with JS stores, whose answers come back
// through Promises: let every pending promise settle between steps of fake time.
import { setImmediate as macrotask } from 'node:timers/promises';

/** Lets all queued microtasks and promise chains run. */
export async function flush(rounds = 3) {
  for (let i = 0; i < rounds; i++) await macrotask();
}

/** Advances fake time by `ms` in steps of `step`, flushing promises after each step. */
export async function advance(clock, ms, step = ms) {
  await flush();
  let left = ms;
  while (left > 0) {
    const by = Math.min(step, left);
    clock.advance(by);
    left -= by;
    await flush();
  }
  if (ms === 0) await flush();
}

/** A promise with its resolve/reject exposed. */
export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
