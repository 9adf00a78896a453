// The one scenario every runtime of the matrix runs (js-tests/matrix/run.mjs). Plain
// ECMAScript plus the globals every target has (setTimeout, AbortController, crypto):
// no Node built-ins, so it runs unchanged in Node, Bun, Deno, workerd and Chromium.
//
// `api` is the package's module namespace as the runtime loaded it; `config`:
//   engine            the engine the runtime should have picked ('native' | 'wasm')
//   ambientAcrossAwait  whether getLockToken() without a context survives an `await`
//                     (true where AsyncLocalStorage exists; false in browsers)
//   memoryWaits       false where a wait on the memory store is refused (workerd)
//   exportNames       the names lib/entries/index.mjs exports; every entry must export the same
// `prepared` is what `prepare(api)` returned when the harness called it at module load.
// Resolves to [{ name, ok, detail }], one per check; never rejects.

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Lets store promises and engine follow-ups settle between fake-time steps. */
async function flush(rounds = 4) {
  for (let i = 0; i < rounds; i++) await tick();
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** A correct in-memory JS store that counts its calls; `renewAnswer` forces renew's answer. */
function countingStore(now, { renewAnswer } = {}) {
  const calls = { acquire: 0, renew: 0, release: 0 };
  const leases = new Map();
  let lastToken = 100;
  const live = (key) => {
    const lease = leases.get(key);
    return lease && lease.expires > now() ? lease : undefined;
  };
  return {
    calls,
    async acquire(key, owner, ttlMs) {
      calls.acquire++;
      if (live(key)) return undefined;
      leases.set(key, { owner, expires: now() + ttlMs });
      lastToken += 1;
      return { fencingToken: lastToken };
    },
    async renew(key, owner, ttlMs) {
      calls.renew++;
      if (renewAnswer !== undefined) return renewAnswer;
      const lease = live(key);
      if (!lease || lease.owner !== owner) return false;
      lease.expires = now() + ttlMs;
      return true;
    },
    async release(key, owner) {
      calls.release++;
      if (leases.get(key)?.owner === owner) leases.delete(key);
    },
  };
}

/**
 * Called by every harness at module load, as users build pipelines at the top of a
 * module (workerd forbids random values and timers there, so nothing may need them).
 */
export function prepare(api) {
  try {
    return { pipeline: new api.ResiliencePipelineBuilder().addLock({ key: 'matrix-module-scope' }).build() };
  } catch (error) {
    return { error };
  }
}

const checks = {
  /** The entry exports what lib/entries/index.mjs exports, and picked the expected engine. */
  async entry(api, config) {
    const names = Object.keys(api).filter((n) => n !== 'default').sort();
    const expected = [...config.exportNames].sort();
    check(
      JSON.stringify(names) === JSON.stringify(expected),
      `exports ${names.join(',')}; expected ${expected.join(',')}`,
    );
    check(api.engine === config.engine, `engine is '${api.engine}', expected '${config.engine}'`);
    return `engine ${api.engine}, ${names.length} exports`;
  },

  /**
   * 20 concurrent executions on one key never overlap, and their tokens strictly increase.
   * They wait on `prepared.waitStore` where the harness gives one (workerd), else on the default store.
   */
  async exclusion(api, config, prepared) {
    const { ResiliencePipelineBuilder, getLockToken } = api;
    const key = `matrix-exclusion-${Math.random()}`;
    const store = prepared?.waitStore;
    const pipeline = new ResiliencePipelineBuilder().addLock({ key, ttl: '10s', wait: '20s', store }).build();
    let holders = 0;
    let maxHolders = 0;
    const tokens = [];
    const runs = Array.from({ length: 20 }, (_, i) =>
      pipeline.execute(async (context) => {
        holders++;
        maxHolders = Math.max(maxHolders, holders);
        tokens.push(getLockToken(context));
        await sleep(i % 3);
        await tick();
        holders--;
        return i;
      }),
    );
    const values = await Promise.all(runs);
    check(values.length === 20 && values.every((v, i) => v === i), `values ${values}`);
    check(maxHolders === 1, `max concurrent holders ${maxHolders}`);
    check(tokens.length === 20, `${tokens.length} callbacks ran`);
    for (let i = 1; i < tokens.length; i++) {
      check(Number.isSafeInteger(tokens[i]) && tokens[i] > tokens[i - 1], `tokens not increasing: ${tokens.join(',')}`);
    }
    return `20 runs${store ? ` on ${store.constructor.name}` : ''}, max 1 holder, tokens ${tokens[0]}..${tokens[19]}`;
  },

  /** A pipeline built at module load works in the handler. */
  async moduleScope(api, config, prepared) {
    check(prepared !== undefined, 'the harness did not call prepare(api) at module load');
    if (prepared.error) throw new Error(`building a pipeline at module load threw: ${prepared.error?.stack ?? prepared.error}`);
    const value = await prepared.pipeline.execute((context) => api.getLockToken(context));
    check(Number.isSafeInteger(value), `the callback saw token ${value}`);
    return 'built at module load, run in the handler';
  },

  /** A held key fails fast with the exported rejection class. */
  async rejection(api) {
    const { ResiliencePipelineBuilder, LockNotAcquiredError, isRejection } = api;
    const key = `matrix-held-${Math.random()}`;
    const pipeline = new ResiliencePipelineBuilder().addLock({ key }).build();
    let inner;
    await pipeline.execute(async () => {
      inner = await pipeline.settle(() => 'never');
    });
    const error = inner.ok ? undefined : inner.error;
    check(error instanceof LockNotAcquiredError && error instanceof Error, `got ${error}`);
    check(error.code === 'LOCK_NOT_ACQUIRED' && error.key === key && isRejection(error), `fields of ${error}`);
    return 'LockNotAcquiredError';
  },

  /** A JS store is called back by the engine: acquire, renew on fake time, release. */
  async jsStore(api) {
    const { ResiliencePipelineBuilder, FakeTimeProvider, getLockToken } = api;
    const clock = new FakeTimeProvider();
    const store = countingStore(() => clock.now());
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'matrix-js-store', ttl: 300, store })
      .build();
    let release;
    const gate = new Promise((resolve) => (release = resolve));
    let token;
    const running = pipeline.execute(async (context) => {
      token = getLockToken(context);
      await gate;
      return 'done';
    });
    await flush();
    check(store.calls.acquire === 1, `acquire called ${store.calls.acquire} times`);
    check(token === 101, `token from the JS store is ${token}, expected 101`);
    for (let i = 0; i < 3; i++) {
      clock.advance(100);
      await flush();
    }
    check(store.calls.renew === 3, `renew called ${store.calls.renew} times after 300 ms at ttl 300`);
    release();
    check((await running) === 'done', 'the execution resolves to the callback value');
    check(store.calls.release === 1, `release called ${store.calls.release} times`);
    return `acquire ${store.calls.acquire}, renew ${store.calls.renew}, release ${store.calls.release}`;
  },

  /** renew answering false is a loss: the signal aborts with LockLostError, the execution rejects with it. */
  async loss(api) {
    const { ResiliencePipelineBuilder, FakeTimeProvider, LockLostError } = api;
    const clock = new FakeTimeProvider();
    const store = countingStore(() => clock.now(), { renewAnswer: false });
    const lost = [];
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'matrix-loss', ttl: 300, store, onLockLost: ({ key }) => lost.push(key) })
      .build();
    let aborted;
    const outcome = pipeline.settle(
      ({ signal }) =>
        new Promise((_, reject) => {
          signal.addEventListener('abort', () => {
            aborted = signal.reason;
            reject(signal.reason);
          });
        }),
    );
    await flush();
    clock.advance(100);
    await flush();
    const result = await outcome;
    check(store.calls.renew === 1, `renew called ${store.calls.renew} times`);
    check(aborted instanceof LockLostError && aborted.code === 'LOCK_LOST', `signal reason ${aborted}`);
    check(!result.ok && result.error instanceof LockLostError, `execution settled with ${result.error ?? result.value}`);
    check(result.error.key === 'matrix-loss' && lost.length === 1, `onLockLost calls ${lost.length}`);
    return 'signal aborted with LockLostError';
  },

  /** getLockToken(): explicit always; ambient in the synchronous part; across await only with AsyncLocalStorage. */
  async ambient(api, config) {
    const { ResiliencePipelineBuilder, getLockToken } = api;
    const pipeline = new ResiliencePipelineBuilder().addLock({ key: `matrix-ambient-${Math.random()}` }).build();
    const deep = () => getLockToken();
    let seen;
    await pipeline.execute(async (context) => {
      const explicit = getLockToken(context);
      const sync = deep();
      await tick();
      const afterAwait = deep();
      const explicitAfter = getLockToken(context);
      seen = { explicit, sync, afterAwait, explicitAfter };
    });
    check(Number.isSafeInteger(seen.explicit), `getLockToken(context) is ${seen.explicit}`);
    check(seen.explicitAfter === seen.explicit, `getLockToken(context) after await is ${seen.explicitAfter}`);
    check(seen.sync === seen.explicit, `getLockToken() in the synchronous part is ${seen.sync}`);
    const expectedAfter = config.ambientAcrossAwait ? seen.explicit : undefined;
    check(
      seen.afterAwait === expectedAfter,
      `getLockToken() after await is ${seen.afterAwait}, expected ${expectedAfter}`,
    );
    check(getLockToken() === undefined, 'getLockToken() outside any lock is not undefined');
    return config.ambientAcrossAwait ? 'ambient across await' : 'ambient in the synchronous part only';
  },

  /**
   * Where AsyncLocalStorage exists, a callback runs in the async context execute() was
   * called in (a user's own store reads its own value), whether its key was free or it
   * was granted by another caller's release; the lock's context does not leak out.
   */
  async callerContext(api, config) {
    if (!config.ambientAcrossAwait) return 'no AsyncLocalStorage here';
    const { AsyncLocalStorage } = await import('node:async_hooks');
    const { ResiliencePipelineBuilder, getLockToken } = api;
    const user = new AsyncLocalStorage();
    const key = `matrix-caller-${Math.random()}`;
    const other = new ResiliencePipelineBuilder().addLock({ key: `${key}-other` }).build();
    const seen = [];
    if (config.memoryWaits === false) {
      await user.run('free', () => other.execute(() => seen.push(['free', user.getStore()])));
      check(JSON.stringify(seen) === '[["free","free"]]', `the callback saw ${JSON.stringify(seen)}`);
      return "the callback in its caller's context (no waits here)";
    }
    const pipeline = new ResiliencePipelineBuilder().addLock({ key, wait: '5s' }).build();
    let release;
    const held = new Promise((resolve) => {
      release = resolve;
    });
    const runs = [
      user.run('holder', () => pipeline.execute(() => (seen.push(['holder', user.getStore()]), held))),
      user.run('free', () => other.execute(() => seen.push(['free', user.getStore()]))),
      user.run('waiter', () =>
        pipeline.execute(async (context) => {
          await tick();
          seen.push(['waiter', user.getStore(), getLockToken() === getLockToken(context)]);
        }),
      ),
    ];
    await tick();
    user.run('releaser', () => release());
    await Promise.all(runs);
    const text = JSON.stringify(seen);
    check(text === '[["holder","holder"],["free","free"],["waiter","waiter",true]]', `callbacks saw ${text}`);
    check(getLockToken() === undefined && user.getStore() === undefined, 'the lock context leaked into the caller');
    return "each callback in its caller's context";
  },
};

export const checkNames = Object.keys(checks);

const CHECK_TIMEOUT_MS = 15_000;

function bounded(promise, name) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name} did not finish within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export async function runScenario(api, config, prepared) {
  const results = [];
  for (const [name, fn] of Object.entries(checks)) {
    const started = Date.now();
    try {
      const detail = await bounded(fn(api, config, prepared), name);
      results.push({ name, ok: true, detail, ms: Date.now() - started });
    } catch (error) {
      results.push({ name, ok: false, detail: String(error?.stack ?? error), ms: Date.now() - started });
    }
  }
  return results;
}
