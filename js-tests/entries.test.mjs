// The package's entries and the two engines stay in step: both bindings offer the host
// the same methods, every runtime entry exports the same names, and each `exports`
// condition resolves to the entry meant for it. (js-tests/matrix/run.mjs runs the
// entries themselves in their runtimes.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('..', import.meta.url));

function methods(Engine) {
  // wasm-bindgen adds `free` and `__destroy_into_raw` for manual memory management; the
  // wasm engine's `*Fast` forms and `takeError` stand behind `startDefined`, `finish` and
  // `token` (lib/host/fast-calls.cjs installs them).
  const glue = new Set(['constructor', 'free', '__destroy_into_raw', 'startDefinedFast', 'finishFast', 'tokenFast', 'takeError']);
  return Object.getOwnPropertyNames(Engine.prototype)
    .filter((name) => !glue.has(name))
    .sort();
}

test('the native and wasm engines offer the host the same methods', () => {
  // As the host takes them: with the fast paths installed (lib/host/fast-calls.cjs).
  const { withFastCalls } = require('../lib/host/fast-calls.cjs');
  const native = withFastCalls(require('../lib/entries/native.cjs').load());
  const wasm = withFastCalls(require('../lib/entries/wasm-node.cjs').load());
  assert.deepEqual(methods(wasm.Engine), methods(native.Engine));
  assert.equal(typeof wasm.checkDuration, 'function');
  assert.equal(typeof native.checkDuration, 'function');
});

/** The names an entry file exports, read from its `export const { ... } = api;`. */
function exportedNames(file) {
  const source = fs.readFileSync(new URL(`../lib/entries/${file}`, import.meta.url), 'utf8');
  const match = /export const \{([^}]*)\} = api;/.exec(source);
  assert.ok(match, `${file} has no 'export const { ... } = api;'`);
  assert.match(source, /export default api;/, `${file} has no default export`);
  return match[1]
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean)
    .sort();
}

test('every runtime entry exports the same names as the Node entry', async () => {
  const node = Object.keys(await import('leasehold')).filter((name) => name !== 'default').sort();
  assert.deepEqual(exportedNames('index.mjs'), node);
  for (const entry of ['browser.mjs', 'workerd.mjs', 'deno.mjs']) {
    assert.deepEqual(exportedNames(entry), node, entry);
  }
});

test('each exports condition resolves to its entry; Node keeps the native-first entry', () => {
  const expected = {
    '': 'lib/entries/index.mjs',
    workerd: 'lib/entries/workerd.mjs',
    worker: 'lib/entries/browser.mjs',
    browser: 'lib/entries/browser.mjs',
    deno: 'lib/entries/deno.mjs',
  };
  for (const [condition, file] of Object.entries(expected)) {
    const args = ['--input-type=module', '-e', "process.stdout.write(import.meta.resolve('leasehold'))"];
    if (condition) args.unshift(`--conditions=${condition}`);
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(fileURLToPath(r.stdout), `${root}${file}`, `condition '${condition}'`);
  }
  assert.equal(require.resolve('leasehold'), `${root}lib/entries/index.cjs`);
  assert.equal(require.resolve('leasehold/node'), `${root}lib/entries/index.cjs`);
});

/** What `require('leasehold')` picks in a child process with `env`, on a CPU it is told it has. */
function pick(env, arch = process.arch) {
  // Pretending another CPU makes the loader look for that platform's addon.
  const pretend = `Object.defineProperty(process, 'arch', { value: ${JSON.stringify(arch)} });`;
  const source = `${pretend} try { const l = require('leasehold'); console.log(JSON.stringify({ engine: l.engine, reason: l.engineFallbackReason ?? null })); } catch (e) { console.log(JSON.stringify({ error: e.message })); }`;
  const childEnv = { ...process.env, ...env };
  if (env.LEASEHOLD_ENGINE === undefined) delete childEnv.LEASEHOLD_ENGINE;
  const r = spawnSync(process.execPath, ['-e', source], { cwd: root, env: childEnv, encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('engineFallbackReason says why Node runs wasm, and is undefined on the native engine', () => {
  assert.deepEqual(pick({}), { engine: 'native', reason: null });
  assert.deepEqual(pick({ LEASEHOLD_ENGINE: 'wasm' }), { engine: 'wasm', reason: 'LEASEHOLD_ENGINE=wasm' });
  const libc = process.platform === 'linux' ? `-${require('../lib/entries/native.cjs').platformTriple().split('-')[2]}` : '';
  // A platform with a package that is not installed here, and one with none published.
  if (process.platform === 'linux' && libc === '-gnu') {
    assert.deepEqual(pick({}, 'arm64'), {
      engine: 'wasm',
      reason: '@leasehold/linux-arm64-gnu is not installed (npm skips it when optional dependencies are omitted: install again without --omit=optional)',
    });
  }
  assert.deepEqual(pick({}, 'riscv64'), { engine: 'wasm', reason: `no native addon is published for ${process.platform}-riscv64${libc}` });
  assert.deepEqual(pick({ LEASEHOLD_ENGINE: 'native' }, 'riscv64'), {
    error: `LEASEHOLD_ENGINE=native, but the native addon did not load: no native addon is published for ${process.platform}-riscv64${libc}`,
  });
});

/** Writes `files` into a fresh folder under js-tests/.tmp (inside the package, so 'leasehold' resolves to it). */
function scratch(name, files) {
  const dir = fileURLToPath(new URL(`./.tmp/${name}-${process.pid}/`, import.meta.url));
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) fs.writeFileSync(`${dir}${file}`, text);
  return dir;
}

function tsc(args, cwd) {
  return spawnSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, ...args], { cwd, encoding: 'utf8', timeout: 120_000 });
}

const TSC_BASE = ['--strict', '--target', 'ES2022', '--lib', 'ES2022,DOM', '--types', 'node'];

// The error classes are exported so that users can throw them (a custom store, a test
// double) and match them; lib/host/errors.cjs takes (key, message?, options?) and, for
// LockStoreError, (key, method, message?, options?). index.d.ts declares no constructor,
// so TypeScript offers Error's (message?, options?): the real calls do not compile, and
// `new LockLostError('lease gone')` compiles with the message landing in `key`.
test('index.d.ts declares the error classes with the constructors lib/host/errors.cjs has', () => {
  const dir = scratch('ctor-types', {
    'errors.ts': [
      "import { LockNotAcquiredError, LockLostError, LockStoreError } from 'leasehold';",
      "const held = new LockNotAcquiredError('k', 'held by a test double');",
      "const lost = new LockLostError('k', 'lost in a test', { cause: new Error('x') });",
      "const failed = new LockStoreError('k', 'acquire', 'the store failed', { cause: new Error('down') });",
      'export const keys: string[] = [held.key, lost.key, failed.key];',
      '',
    ].join('\n'),
  });
  const r = tsc([...TSC_BASE, '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--noEmit', 'errors.ts'], dir);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const { LockLostError, LockStoreError } = require('leasehold');
  assert.equal(new LockLostError('k', 'lost in a test').key, 'k');
  assert.equal(new LockStoreError('k', 'acquire', 'the store failed').method, 'acquire');
});

// index.d.ts ends with `export default api`, but `require('leasehold')` is the API object
// itself, with no `default`: TypeScript compiling `import leasehold from 'leasehold'` to
// CommonJS without esModuleInterop (`--esModuleInterop false`) reads `.default` and gets
// undefined.
test("the CommonJS entry has the default export index.d.ts declares", () => {
  const dir = scratch('default-cjs', {
    'main.ts': "import leasehold from 'leasehold';\nconsole.log(leasehold.engine);\n",
  });
  const compiled = tsc([...TSC_BASE, '--module', 'NodeNext', '--esModuleInterop', 'false', 'main.ts'], dir);
  assert.equal(compiled.status, 0, compiled.stdout + compiled.stderr);
  const run = spawnSync(process.execPath, [`${dir}main.js`], { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^(native|wasm)$/m);
  assert.equal(require('leasehold').default, require('leasehold'));
});
