// Bounded waits for tests against real servers and processes: every wait has a limit,
// and a wait that runs out says what it was waiting for.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

/** Rejects when `promise` has not settled after `ms`. */
export async function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `check` every `intervalMs` until it returns a truthy value (resolved to); throws
 * after `timeoutMs`, with the last error `check` threw as the cause.
 */
export async function pollUntil(what, check, { timeoutMs, intervalMs }) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
    }
    await sleep(intervalMs);
  }
}

/**
 * Fails the calling test file, at its end, if any promise in it was rejected without a
 * handler (registers node:test `before` and `after` hooks).
 */
export function noUnhandledRejections(before, after) {
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  before(() => process.on('unhandledRejection', onUnhandled));
  after(() => {
    process.off('unhandledRejection', onUnhandled);
    assert.deepEqual(unhandled, [], 'no unhandled rejection anywhere in this file');
  });
}
