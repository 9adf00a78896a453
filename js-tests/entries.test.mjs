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
  // `token` (lib/host.cjs installs them).
  const glue = new Set(['constructor', 'free', '__destroy_into_raw', 'startDefinedFast', 'finishFast', 'tokenFast', 'takeError']);
  return Object.getOwnPropertyNames(Engine.prototype)
    .filter((name) => !glue.has(name))
    .sort();
}

test('the native and wasm engines offer the host the same methods', () => {
  const native = require('../lib/native.cjs').load();
  const wasm = require('../lib/wasm-node.cjs').load();
  assert.deepEqual(methods(wasm.Engine), methods(native.Engine));
  assert.equal(typeof wasm.checkDuration, 'function');
  assert.equal(typeof native.checkDuration, 'function');
});

/** The names an entry file exports, read from its `export const { ... } = api;`. */
function exportedNames(file) {
  const source = fs.readFileSync(new URL(`../lib/${file}`, import.meta.url), 'utf8');
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
    '': 'lib/index.mjs',
    workerd: 'lib/workerd.mjs',
    worker: 'lib/browser.mjs',
    browser: 'lib/browser.mjs',
    deno: 'lib/deno.mjs',
  };
  for (const [condition, file] of Object.entries(expected)) {
    const args = ['--input-type=module', '-e', "process.stdout.write(import.meta.resolve('leasehold'))"];
    if (condition) args.unshift(`--conditions=${condition}`);
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(fileURLToPath(r.stdout), `${root}${file}`, `condition '${condition}'`);
  }
  assert.equal(require.resolve('leasehold'), `${root}lib/index.cjs`);
  assert.equal(require.resolve('leasehold/node'), `${root}lib/index.cjs`);
});
