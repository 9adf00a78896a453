// The layout of lib/ is the architecture (docs/ARCHITECTURE.md, "The files"): these
// tests keep it so. The host imports no store and no store imports the host; nothing
// imports in a circle; no source file grows past 500 lines; every public subpath
// points at files that exist, each CommonJS store's .d.mts face re-exports its .d.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const lib = path.join(root, 'lib');

function sources(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(file);
    return /\.(c|m)?js$/.test(entry.name) ? [file] : [];
  });
}

const FILES = sources(lib);
const SPECIFIER = /\brequire\(\s*'([^']+)'\s*\)|\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g;

/** The files of lib/ that `file` imports (relative specifiers only), as paths. */
function importsOf(file) {
  const found = [];
  for (const m of fs.readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (!spec.startsWith('.')) continue;
    const target = path.resolve(path.dirname(file), spec);
    if (target.startsWith(lib + path.sep)) found.push(target);
  }
  return found;
}

/** `lib/host/x.cjs` -> 'host'; `lib/stores/redis/x.cjs` -> 'stores'. */
const part = (file) => path.relative(lib, file).split(path.sep)[0];

// Which part may import which: entries wire everything; stores meet the host only
// through the LockStore contract, at run time; the store kit (`leasehold/testing`)
// checks a store from outside, as a user's test would; OpenTelemetry (`otel/`) is a
// recorder the host feeds, loaded by the Node entry only; the command line (`cli/`)
// uses the stores as a user does.
const ALLOWED = {
  common: ['common'],
  host: ['host', 'otel', 'common'],
  otel: ['otel', 'common'],
  stores: ['stores', 'common'],
  entries: ['entries', 'host', 'otel', 'common'],
  cli: ['cli', 'stores', 'common'],
  testing: ['testing', 'common'],
};

test('every lib/ file is in one of its parts', () => {
  const unknown = FILES.filter((f) => !(part(f) in ALLOWED)).map((f) => path.relative(root, f));
  assert.deepEqual(unknown, []);
});

test('no source file in lib/ is over 500 lines', () => {
  const long = FILES.map((f) => [path.relative(root, f), fs.readFileSync(f, 'utf8').split('\n').length - 1]).filter(([, n]) => n > 500);
  assert.deepEqual(long, []);
});

test('the seam: the host imports no store, a store imports no host, common imports neither', () => {
  const wrong = [];
  for (const file of FILES) {
    for (const target of importsOf(file)) {
      if (!ALLOWED[part(file)]?.includes(part(target))) wrong.push(`${path.relative(root, file)} -> ${path.relative(root, target)}`);
    }
  }
  assert.deepEqual(wrong, []);
  // A store imports no other store's folder, only its own and shared/.
  for (const file of FILES.filter((f) => part(f) === 'stores')) {
    const own = path.relative(lib, file).split(path.sep)[1];
    for (const target of importsOf(file).filter((t) => part(t) === 'stores')) {
      const theirs = path.relative(lib, target).split(path.sep)[1];
      assert.ok(theirs === own || theirs === 'shared', `${path.relative(root, file)} imports ${path.relative(root, target)}`);
    }
  }
});

test('no import circle in lib/', () => {
  const graph = new Map(FILES.map((f) => [f, importsOf(f)]));
  const state = new Map(); // file -> 'open' | 'done'
  const circles = [];
  const visit = (file, trail) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      circles.push([...trail.slice(trail.indexOf(file)), file].map((f) => path.relative(root, f)).join(' -> '));
      return;
    }
    state.set(file, 'open');
    for (const next of graph.get(file) ?? []) visit(next, [...trail, file]);
    state.set(file, 'done');
  };
  for (const file of FILES) visit(file, []);
  assert.deepEqual(circles, []);
});

test("every public subpath's files exist; a CommonJS store's .d.mts re-exports its .d.ts", () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const targets = (value) => (typeof value === 'string' ? [value] : Object.values(value).flatMap(targets));
  for (const [subpath, value] of Object.entries(manifest.exports)) {
    for (const target of targets(value)) {
      if (target.startsWith('./dist/')) continue; // built
      assert.ok(fs.existsSync(path.join(root, target)), `${subpath}: ${target} is missing`);
    }
    const types = value.types;
    if (types !== undefined && typeof types === 'object') {
      const face = fs.readFileSync(path.join(root, types.import), 'utf8');
      const base = path.basename(types.default, '.d.ts');
      assert.match(face, new RegExp(`^export \\* from '\\./${base}\\.js';$`, 'm'), `${types.import} re-exports ${types.default}`);
    }
  }
});
