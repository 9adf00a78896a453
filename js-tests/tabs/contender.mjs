// What a page or a dedicated worker of js-tests/tabs-store.test.mjs does: it locks one key
// through a TabLockStore on the wasm engine, and reports to the fenced resource.
import { ResiliencePipelineBuilder, getLockToken, isRejection } from '/lib/entries/browser.mjs';
import { TabLockStore } from '/lib/stores/tabs/index.mjs';
import * as resource from './resource.mjs';

const store = new TabLockStore({ prefix: 'tabs-test' });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const held = new Map(); // name -> { letGo, running }
const started = new Map(); // name -> the execution's promise

function pipeline({ key, ttl = '10s', wait = '30s' }) {
  return new ResiliencePipelineBuilder().addLock({ key, ttl, wait, store }).build();
}

/** `count` executions one after another, each holding for `holdMs`: their tokens. */
export async function loop({ key, name, count, holdMs }) {
  const locked = pipeline({ key });
  const tokens = [];
  for (let i = 0; i < count; i++) {
    await locked.execute(async (context) => {
      const token = getLockToken(context);
      tokens.push(token);
      await resource.enter(name, token);
      await sleep(holdMs);
      await resource.leave(name);
    });
  }
  return tokens;
}

/** Takes the key and holds it until letGo(name); resolves the token once held. */
export function hold({ key, name, ttl }) {
  return new Promise((resolve, reject) => {
    let letGo;
    const gate = new Promise((r) => (letGo = r));
    const running = pipeline({ key, ttl }).execute(async (context) => {
      const token = getLockToken(context);
      await resource.enter(name, token);
      resolve(token);
      await gate;
      await resource.leave(name);
      return token;
    });
    running.catch(reject);
    held.set(name, { letGo, running });
  });
}

export async function letGo(name) {
  const h = held.get(name);
  h.letGo();
  return h.running;
}

/** Starts an execution that waits for the key, enters and leaves at once. */
export function start({ key, name, wait }) {
  const running = pipeline({ key, wait }).execute(async (context) => {
    const token = getLockToken(context);
    await resource.enter(name, token);
    await resource.leave(name);
    await resource.write(name, token);
    return token;
  });
  started.set(name, running);
  running.catch(() => {});
}

export const finished = (name) => started.get(name);

/** A fail-fast try: 'rejected' when the key is held elsewhere, else its token. */
export async function tryOnce({ key }) {
  const outcome = await pipeline({ key, wait: 0 }).settle((context) => getLockToken(context));
  if (outcome.ok) return outcome.value;
  if (isRejection(outcome.error)) return 'rejected';
  throw outcome.error;
}

/**
 * A holder that falls asleep: it takes the key with a short ttl, waits for wake(name),
 * then blocks its event loop for `sleepMs` (no timer runs, so nothing renews). Awake
 * again, it waits until someone else has written, then writes with its own token.
 */
export function sleeper({ key, name, ttl, sleepMs }) {
  return new Promise((resolve, reject) => {
    let wake;
    const gate = new Promise((r) => (wake = r));
    const running = pipeline({ key, ttl }).execute(async (context) => {
      const token = getLockToken(context);
      resolve(token);
      await gate;
      const until = performance.now() + sleepMs;
      while (performance.now() < until) {
        // asleep
      }
      for (let i = 0; i < 500 && (await resource.read()).lastToken <= token; i++) await sleep(20);
      const accepted = await resource.write(name, token);
      return { token, accepted, lost: context.signal.aborted ? context.signal.reason?.code : undefined };
    });
    running.catch(reject);
    held.set(name, { letGo: wake, running });
  });
}

export const isLocked = (key) => store.isLocked(key);
export const pending = async () => (await navigator.locks.query()).pending.length;
export const readResource = () => resource.read();
export const resetResource = () => resource.reset();

/** What this page's store shows of `key` (inspect), and the keys held under `prefix` (list). */
export async function inspect({ key, prefix }) {
  const keys = [];
  for await (const k of store.list({ prefix })) keys.push(k);
  return { seen: (await store.inspect(key)) ?? null, keys, now: Date.now() };
}
