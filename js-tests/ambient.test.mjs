// The ambient token and its opt-out (`ambientToken: false`), and what each costs the
// process: before Node 24, AsyncLocalStorage turns promise hooks on for every later
// promise of the process. Runs once per engine.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { AsyncLocalStorage } from 'node:async_hooks';
import { fileURLToPath } from 'node:url';
import {
  ResiliencePipelineBuilder,
  FakeTimeProvider,
  LOCK_TOKEN,
  withLock,
  getLockToken,
} from './support/leasehold.mjs';
import { deferred, flush } from './support/time.mjs';
import { grantingStore } from './support/stores.mjs';

const pipelineOn = (clock, key, builder = {}) =>
  new ResiliencePipelineBuilder({ timeProvider: clock, ...builder }).addLock({ key }).build();

describe('ambientToken: false', () => {
  test('the callback reads its token from the context; getLockToken() is undefined inside it', async () => {
    const pipeline = pipelineOn(new FakeTimeProvider(), 'passed', { ambientToken: false });
    const seen = await pipeline.execute(async (context) => {
      const sync = getLockToken();
      await flush(1);
      return { sync, afterAwait: getLockToken(), explicit: getLockToken(context), property: context.properties.get(LOCK_TOKEN) };
    });
    assert.equal(typeof seen.explicit, 'number');
    assert.equal(seen.property, seen.explicit);
    assert.equal(seen.sync, undefined, 'not in the synchronous part');
    assert.equal(seen.afterAwait, undefined, 'nor after an await');
  });

  test('inside an ambient lock, an opted-out callback hides the enclosing token; the outer sees its own again', async () => {
    const clock = new FakeTimeProvider();
    const ambient = pipelineOn(clock, 'outer');
    const passed = pipelineOn(clock, 'inner', { ambientToken: false });
    const seen = await ambient.execute(async (outerContext) => {
      const inner = await passed.execute(async (context) => {
        const sync = getLockToken();
        await flush(1);
        return { sync, afterAwait: getLockToken(), own: getLockToken(context) };
      });
      return { outer: getLockToken(outerContext), after: getLockToken(), inner };
    });
    assert.equal(seen.inner.sync, undefined);
    assert.equal(seen.inner.afterAwait, undefined);
    assert.equal(typeof seen.inner.own, 'number');
    assert.notEqual(seen.inner.own, seen.outer);
    assert.equal(seen.after, seen.outer, "back in the outer callback: the outer's token");
  });

  test('an ambient lock inside an opted-out one: its token while it runs, then no lock for its leftover work', async () => {
    const clock = new FakeTimeProvider();
    const passed = pipelineOn(clock, 'outer', { ambientToken: false });
    const ambient = pipelineOn(clock, 'inner');
    const innerDone = deferred();
    let leftover;
    const seen = await passed.execute(async (outerContext) => {
      const inner = await ambient.execute(async (context) => {
        leftover = innerDone.promise.then(() => getLockToken());
        await flush(1);
        return { ambient: getLockToken(), own: getLockToken(context) };
      });
      innerDone.resolve();
      return { inner, leftover: await leftover, outer: getLockToken(outerContext), ambient: getLockToken() };
    });
    assert.equal(typeof seen.inner.own, 'number');
    assert.equal(seen.inner.ambient, seen.inner.own);
    assert.equal(seen.leftover, undefined, 'the enclosing lock is not ambient: no token');
    assert.equal(typeof seen.outer, 'number');
    assert.equal(seen.ambient, undefined);
  });

  test('withLock, as a function and as a decorator', async () => {
    const clock = new FakeTimeProvider();
    const viaHelper = await withLock(
      'helper',
      async (context) => {
        await flush(1);
        return { ambient: getLockToken(), own: getLockToken(context) };
      },
      { timeProvider: clock, ambientToken: false },
    );
    assert.equal(viaHelper.ambient, undefined);
    assert.equal(typeof viaHelper.own, 'number');

    const decorate = withLock('method', { timeProvider: clock, ambientToken: false });
    const method = decorate(
      async function read() {
        await flush(1);
        return getLockToken();
      },
      { kind: 'method', name: 'read' },
    );
    assert.equal(await method.call({}), undefined);
    // The default stays ambient.
    assert.equal(typeof (await withLock('helper', async () => getLockToken(), { timeProvider: clock })), 'number');
  });

  test('a value that is not a boolean is a TypeError naming ambientToken', async () => {
    for (const bad of ['false', 0, null, {}]) {
      assert.throws(() => new ResiliencePipelineBuilder({ ambientToken: bad }), (e) => e instanceof TypeError && /\bambientToken\b/.test(e.message));
      await assert.rejects(withLock('k', () => 1, { ambientToken: bad }), (e) => e instanceof TypeError && /\bambientToken\b/.test(e.message));
    }
  });
});

describe('promise hooks', () => {
  const child = fileURLToPath(new URL('./support/promise-hooks-child.cjs', import.meta.url));
  const run = (mode) => {
    const r = spawnSync(process.execPath, [child, mode], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `${mode}: ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').pop());
  };
  // Whether this runtime's own AsyncLocalStorage turns promise hooks on (not where it
  // runs on AsyncContextFrame: Node 24, or Node 22 with a flag).
  const alsHooks = run('probe').hooks;

  test('the check sees the hooks AsyncLocalStorage turns on where it has no AsyncContextFrame', () => {
    if (Number(process.versions.node.split('.')[0]) < 22) assert.equal(alsHooks, true, 'Node 20 has no AsyncContextFrame');
  });

  test('loading leasehold turns no promise hooks on', () => {
    const out = run('import');
    assert.equal(out.engine, process.env.LEASEHOLD_ENGINE || out.engine);
    assert.equal(out.hooks, false);
  });

  test('a process whose every lock opts out never turns promise hooks on', () => {
    const out = run('opted-out');
    assert.equal(out.before, false);
    assert.equal(out.hooks, false);
    // The locks did run, and their tokens reached the callbacks through the context.
    assert.equal(typeof out.result.token, 'number');
    assert.equal(typeof out.result.nested.token, 'number');
    assert.equal(typeof out.result.withLock, 'number');
    assert.equal(out.result.ambient, undefined);
    assert.equal(out.result.nested.ambient, undefined);
  });

  test('an ambient execution costs what the runtime\'s AsyncLocalStorage costs, no more', () => {
    const out = run('ambient');
    assert.equal(out.before, false, 'not at import');
    assert.equal(typeof out.result, 'number', 'the ambient token reached the callback across await');
    assert.equal(out.hooks, alsHooks);
  });
});

describe("the caller's async context", () => {
  // A user's own AsyncLocalStorage (a request id, a trace) must read, inside a callback,
  // what it read where execute() was called: not the value of whoever granted the lock.
  test('a callback runs in its caller\'s context: free key, granted by a release, answered by a JS store', async () => {
    const user = new AsyncLocalStorage();
    const clock = new FakeTimeProvider();
    const store = grantingStore(clock, { deliver: 'later' });
    const memory = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'm', wait: '5s' }).build();
    const remote = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'r', store, wait: '5s' }).build();
    const free = pipelineOn(clock, 'free');
    const seen = [];
    const note = (name) => seen.push(`${name}:${user.getStore()}`);
    const hold = deferred();
    const holdRemote = deferred();
    const runs = [
      user.run('a', () => memory.execute(() => (note('a'), hold.promise))),
      user.run('b', () => free.execute(() => note('b'))),
      user.run('c', () => memory.execute(async () => (await flush(1), note('c')))),
      user.run('d', () => remote.execute(() => (note('d'), holdRemote.promise))),
      user.run('e', () => remote.execute(() => note('e'))),
    ];
    await flush(20);
    user.run('x', () => hold.resolve());
    await flush(20);
    user.run('y', () => holdRemote.resolve());
    for (let i = 0; i < 50 && seen.length < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    await Promise.all(runs);
    assert.deepEqual(seen.sort(), ['a:a', 'b:b', 'c:c', 'd:d', 'e:e']);
    assert.equal(user.getStore(), undefined);
    assert.equal(getLockToken(), undefined, 'no lock context leaks into the caller');
  });

  test('with ambientToken: false the caller\'s own context is kept too', async () => {
    const user = new AsyncLocalStorage();
    const clock = new FakeTimeProvider();
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, ambientToken: false }).addLock({ key: 'o', wait: '5s' }).build();
    const hold = deferred();
    const seen = [];
    const first = user.run('first', () => pipeline.execute(() => hold.promise));
    const second = user.run('second', () => pipeline.execute(() => seen.push(user.getStore())));
    await flush(5);
    user.run('releaser', () => hold.resolve());
    await Promise.all([first, second]);
    assert.deepEqual(seen, ['second']);
  });
});
