// The browser entry's lazy engine (lib/entries/browser.mjs, lib/entries/wasm-lazy.mjs), run in Node under
// the `browser` condition: `init({ wasm })` from every kind of source, executions that
// wait for the load, what fails before it; and the wasm engine's durations, checked in
// JavaScript (lib/entries/durations.cjs), against the core's own check in the native addon.
// Engine-independent (the browser entry is always wasm): runs once, on the wasm pass.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';

const skip = process.env.LEASEHOLD_ENGINE === 'native' ? 'the browser entry is wasm only: runs on the wasm pass' : false;
const root = fileURLToPath(new URL('..', import.meta.url));
const WASM = 'dist/wasm/leasehold_wasm_bg.wasm';

/** Runs `script` (an ES module) in a fresh Node with `leasehold` resolved as a browser does; its stdout lines as JSON. */
function inBrowserEntry(script) {
  const child = spawnSync(process.execPath, ['--conditions=browser', '--input-type=module', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(child.status, 0, child.stderr);
  return child.stdout.trim().split('\n').map((line) => JSON.parse(line));
}

/** The engine's answer or error, as comparable data. */
function outcome(fn) {
  try {
    return { value: fn() };
  } catch (error) {
    return { error: error.constructor.name, code: error.code, message: error.message };
  }
}

test("the wasm engine's durations are checked exactly as the core checks them", { skip }, () => {
  const require = createRequire(import.meta.url);
  const { checkDuration } = require('../lib/entries/durations.cjs');
  const native = require('../lib/entries/native.cjs').load();
  // The addon throws plain Errors with a code; the host turns the code into the class.
  const core = (ms, text, arg, infiniteOk) => {
    const result = outcome(() => native.checkDuration(ms, text, arg, infiniteOk));
    if (result.error) result.error = result.code === 'ERR_OUT_OF_RANGE' ? 'RangeError' : 'TypeError';
    return result;
  };
  const same = (ms, text, arg = 'ttl', infiniteOk = false) =>
    assert.deepEqual(outcome(() => checkDuration(ms, text, arg, infiniteOk)), core(ms, text, arg, infiniteOk), `${ms} ${JSON.stringify(text)}`);

  const strings = ['250ms', '30s', '5m', '1h', '1m30s', '1h2m3s4ms', '1.5s', '0ms', '0.07s', '.5s', '5.s', '0.0001ms',
    '1.0000000000000000000001ms', '2.5000000000000000000000ms', '2147483647ms', '0002147483647ms', '2147483648ms',
    '2147483647.0000000000000000001ms', '99999999999999999999999999999999999999999999h', '9'.repeat(400) + 'h', '.s',
    '1.2.3s', '..5s', '', '30', 's', '30 s', ' 30s', '30S', '1s1m', '1s1s', 'abc', '-5s', '1..5s', '5d', 'ms', '600h',
    '596h', '597h', '999999999h', '1h1ms', '1m1ms', '1mms', '1hm', '0001s', '1000000000s',
    'x'.repeat(10_000), 'é'.repeat(41) + 's', '596h31m23.647s', '596h31m23.6471s'];
  for (const text of strings) same(undefined, text);
  for (const ms of [0, -0, 0.2, 1, 2.5, 2147483647, 2147483647.5, 2147483648, 1e15, 1e300, -1, -0.0001, -0.0005, -5.25,
    NaN, Infinity, -Infinity]) {
    same(ms, undefined);
    same(ms, undefined, 'wait', true);
  }
  same(undefined, undefined, 'wait');

  fc.assert(
    fc.property(fc.stringMatching(/^[0-9.mshx]{0,14}$/), (text) => same(undefined, text)),
    { numRuns: 3000 },
  );
  fc.assert(
    fc.property(fc.stringMatching(/^([0-9]{1,10}(h|m|s|ms)){1,4}$/), (text) => same(undefined, text)),
    { numRuns: 3000 },
  );
  fc.assert(
    fc.property(fc.oneof(fc.double(), fc.integer({ min: -1e10, max: 1e10 }).map((n) => n / 7)), fc.boolean(), (ms, infiniteOk) =>
      same(ms, undefined, 'wait', infiniteOk),
    ),
    { numRuns: 2000 },
  );
});

test('before init: pipelines build, executions load the package\'s file and wait for it, a store needs the engine', { skip }, () => {
  const [built, storeError, pending, fetched, order, tokens] = inBrowserEntry(`
    import fs from 'node:fs';
    // A browser's fetch of the package's own file (Node's fetch reads no file: URLs),
    // held until the test lets it answer.
    const asked = [];
    let answer;
    const gate = new Promise((resolve) => (answer = resolve));
    globalThis.fetch = async (url) => {
      asked.push(String(url));
      await gate;
      return new Response(fs.readFileSync(new URL(url)), { headers: { 'content-type': 'application/wasm' } });
    };
    const { ResiliencePipelineBuilder, MemoryLockStore, getLockToken, engine } = await import('leasehold');
    const out = (v) => console.log(JSON.stringify(v));
    // Built at module load, with duration strings, before anything loaded the engine.
    const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: '10s', wait: '1m30s' }).build();
    let badTtl;
    try {
      new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: '10 s' });
    } catch (error) {
      badTtl = error.constructor.name + ': ' + error.message;
    }
    out({ engine, badTtl });
    try {
      new MemoryLockStore();
      out('no error');
    } catch (error) {
      out(error.message);
    }
    // Started before the engine loaded: the first starts the load; they wait for it, then
    // run one at a time, in order.
    const ran = [];
    let settledEarly = false;
    const runs = [1, 2, 3].map((i) => pipeline.execute(async (context) => {
      ran.push(i);
      await new Promise((r) => setTimeout(r, 5));
      return getLockToken(context);
    }));
    Promise.race(runs).then(() => (settledEarly = true), () => (settledEarly = true));
    await new Promise((r) => setTimeout(r, 50));
    out({ settledEarly, ran: ran.length });
    answer();
    const tokens = await Promise.all(runs);
    out(asked.map((url) => url.replace(/^.*[/]/, '')));
    out(ran);
    out(tokens);
  `);
  assert.deepEqual(built, {
    engine: 'wasm',
    badTtl: "TypeError: ttl must be milliseconds or a duration string like '250ms', '30s', '5m', '1h' or '1m30s', got '10 s'",
  });
  assert.match(storeError, /has not loaded yet: `await init\(\)` before using a MemoryLockStore/);
  assert.deepEqual(pending, { settledEarly: false, ran: 0 }, 'nothing ran before the engine loaded');
  assert.deepEqual(fetched, ['leasehold_wasm_bg.wasm'], 'the package file, fetched once');
  assert.deepEqual(order, [1, 2, 3]);
  assert.ok(tokens[0] < tokens[1] && tokens[1] < tokens[2], `tokens ${tokens}`);
});

for (const [kind, source] of [
  ['the bytes', `fs.readFileSync('${WASM}')`],
  ['an ArrayBuffer', `new Uint8Array(fs.readFileSync('${WASM}')).buffer`],
  ['a WebAssembly.Module', `new WebAssembly.Module(fs.readFileSync('${WASM}'))`],
  ['a Response', `new Response(fs.readFileSync('${WASM}'), { headers: { 'content-type': 'application/wasm' } })`],
  ['a promise of a Response', `Promise.resolve(new Response(fs.readFileSync('${WASM}')))`],
]) {
  test(`init({ wasm }) loads the engine from ${kind}`, { skip }, () => {
    const [result] = inBrowserEntry(`
      import fs from 'node:fs';
      import { init, withLock } from 'leasehold';
      const first = init({ wasm: ${source} });
      // Once loading, init() resolves with the same load; once loaded, at once.
      await Promise.all([first, init()]);
      await init({ wasm: new Uint8Array(8) });
      console.log(JSON.stringify(await withLock('k', () => 'ran')));
    `);
    assert.equal(result, 'ran');
  });
}

test('init refuses what is no wasm source, naming it; a failed load is tried again', { skip }, () => {
  const [bad, failed, again] = inBrowserEntry(`
    import fs from 'node:fs';
    import { init, withLock, acquireLock, MemoryLockStore } from 'leasehold';
    const message = (p) => p.then(() => 'resolved', (e) => e.constructor.name + ': ' + e.message);
    console.log(JSON.stringify([
      await message(init(42)),
      await message(init({ wasm: 42 })),
      await message(init({ wasm: '' })),
      await message(init({ wsam: 'x.wasm' })),
    ]));
    console.log(JSON.stringify([
      await message(init({ wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 9]) })),
      await message(withLock('k', () => 'ran')),
    ]));
    await init({ wasm: fs.readFileSync('${WASM}') });
    const lease = await acquireLock(new MemoryLockStore(), 'k', '1s');
    console.log(JSON.stringify([await withLock('k', () => 'ran'), lease.fencingToken > 0]));
  `);
  assert.match(bad[0], /^TypeError: init options must be an object, got 42/);
  assert.match(bad[1], /^TypeError: wasm must be a URL \(a string or a URL\), a Request, a Response .* got 42/);
  assert.match(bad[2], /^TypeError: wasm must be .* got ""/);
  assert.match(bad[3], /^TypeError: init has no option "wsam"; its options are wasm/);
  assert.match(failed[0], /^Error: leasehold: could not load its wasm module from the bytes given \(.*\); .*init\(\{ wasm: itsUrl \}\)/);
  // An execution without init loads from the package's own file, a file: URL here, which
  // Node's fetch does not read.
  assert.match(failed[1], /^Error: leasehold: could not load its wasm module from file:.*leasehold_wasm_bg\.wasm/);
  assert.deepEqual(again, ['ran', true]);
});
