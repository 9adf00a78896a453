// What a page of js-tests/tabs-permits.test.mjs does: calls a TabLockStore directly with
// permits (store level), and keeps the grants its listeners are handed; runs pipelines
// with `mode` or `limit` that tell the test (`window.report`, awaited) when they enter
// and leave.
import { ResiliencePipelineBuilder, getLockToken } from '/lib/entries/browser.mjs';
import { TabLockStore } from '/lib/stores/tabs/index.mjs';

const SHARED_LIMIT = 2147483647;
const store = new TabLockStore({ prefix: 'tabs-permits' });
const PERMITS = {
  plain: undefined,
  read: { limit: SHARED_LIMIT, weight: 1 },
  write: { limit: SHARED_LIMIT, weight: SHARED_LIMIT },
};
/** Grants handed to this page's queued owners, per key: claimed as they come. */
const grants = new Map();

/** The answer of a try: its token, 'none' for undefined, or `{ limit }`; an error as 'Name: message'. */
export async function acquire({ key, owner, as = 'plain', options, ttl = 10_000, queue = false }) {
  if (!grants.has(key)) {
    grants.set(key, []);
    store.subscribe(key, (grant) => {
      grants.get(key).push({ owner: grant.owner, fencingToken: grant.fencingToken });
      return true;
    });
  }
  const asked = options ?? (queue ? { ...PERMITS[as], queue } : PERMITS[as]);
  try {
    const answer = await store.acquire(key, owner, ttl, asked);
    return answer === undefined ? 'none' : (answer.fencingToken ?? answer);
  } catch (error) {
    return `${error.name}: ${error.message}`;
  }
}

export const release = ({ key, owner }) => store.release(key, owner);
export const renew = ({ key, owner, ttl = 10_000 }) => store.renew(key, owner, ttl);
export const grantsOf = (key) => grants.get(key) ?? [];
export const inspect = async (key) => (await store.inspect(key)) ?? null;
export const permits = () => store.permits;
export const modes = async () => (await navigator.locks.query()).held.map((lock) => lock.mode).sort();

const running = new Map(); // name -> { letGo, done }

/**
 * Runs a pipeline with `mode` on `key` that reports entering (with its token), holds
 * until letGo(name), then reports leaving before it lets the lease go: the test sees
 * every leave before the next holder's enter. Resolves the token once inside.
 */
export function hold({ key, name, mode, limit, weight }) {
  return new Promise((resolve, reject) => {
    let letGo;
    const gate = new Promise((r) => (letGo = r));
    const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, mode, limit, weight, ttl: '10s', wait: '30s' }).build();
    const done = pipeline.execute(async (context) => {
      const token = getLockToken(context);
      await window.report('enter', name, mode ?? weight ?? 1, token);
      resolve(token);
      await gate;
      await window.report('leave', name, mode ?? weight ?? 1, token);
      return token;
    });
    done.catch(reject);
    running.set(name, { letGo, done });
  });
}

export const letGo = (name) => {
  running.get(name).letGo();
  return running.get(name).done;
};

export const pending = async () => (await navigator.locks.query()).pending.length;

/** One execution with `mode` (none: a plain lock) that waits up to `wait`: `{ token }` or `{ error, heldWith }`. */
export async function once({ key, mode, wait = '5s' }) {
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, mode, ttl: '10s', wait }).build();
  try {
    return { token: await pipeline.execute((context) => getLockToken(context)) };
  } catch (error) {
    return { error: error.code ?? String(error), heldWith: error.heldWith };
  }
}

/** `count` executions with `limit` and `weight`, one after another, each inside for `holdMs`, reporting as `hold` does: their tokens. */
export async function loop({ key, name, limit, weight = 1, count, holdMs }) {
  const pipeline = new ResiliencePipelineBuilder().addLock({ key, store, limit, weight, ttl: '10s', wait: '30s' }).build();
  const tokens = [];
  for (let i = 0; i < count; i++) {
    tokens.push(
      await pipeline.execute(async (context) => {
        const token = getLockToken(context);
        await window.report('enter', `${name}.${i}`, weight, token);
        await new Promise((resolve) => setTimeout(resolve, holdMs));
        await window.report('leave', `${name}.${i}`, weight, token);
        return token;
      }),
    );
  }
  return tokens;
}
