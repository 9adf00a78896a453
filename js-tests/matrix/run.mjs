#!/usr/bin/env node
// The runtime matrix: runs js-tests/matrix/scenario.mjs in every runtime the package
// supports, with every engine that runtime can load, and writes
// js-tests/matrix/RESULTS.md (the README's runtime table).
//
//   node js-tests/matrix/run.mjs          the working tree (after `bash scripts/build.sh`)
//   node js-tests/matrix/run.mjs --pack   the packed package installed in a fresh project
//                                         outside the repository (pack.mjs): `npm test`
//
// Runtimes: Node (this one, 20), Node 22 and 24 (npm, js-tests/matrix/node22 and node24),
// Bun and Deno (npm), workerd through miniflare, headless Chromium through playwright-core.
// Each loads the package by name, so the package's `exports` conditions pick the entry.
// Prints one line per runtime × engine and `matrix: N passed, M failed`; exits 1 on
// any failure. Every child is bounded by a timeout and killed when this process exits.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CHROMIUM_ARGS } from '../support/chromium.mjs';
import { installPacked } from './pack.mjs';
import { checkNames } from './scenario.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const packed = process.argv.includes('--pack') ? installPacked(root) : undefined;
// Where the runtimes run and resolve `leasehold` from, and the package they find there.
const project = packed?.project ?? root;
const packageDir = packed?.packageDir ?? root;
const tmp = packed ? path.join(project, 'matrix') : path.join(root, 'js-tests', '.tmp', 'matrix');
const RUN_TIMEOUT_MS = 90_000;
const EXIT_GRACE_MS = 5_000;
const CONCURRENCY = 2;
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

const bin = (...parts) => path.join(root, ...parts);
const nodeOf = (major) => bin('js-tests', 'matrix', `node${major}`, 'node_modules', 'node', 'bin', 'node');
const NODE22 = nodeOf(22);
const NODE24 = nodeOf(24);
const BUN = bin('node_modules', '.bin', 'bun');
const DENO = bin('node_modules', '.bin', 'deno');
// An installed copy is imported from a harness in its project, so `leasehold` resolves
// to node_modules there and never to the repository.
if (packed) {
  fs.mkdirSync(tmp, { recursive: true });
  for (const file of ['harness.mjs', 'scenario.mjs']) fs.copyFileSync(path.join(here, file), path.join(tmp, file));
}
const HARNESS = path.join(packed ? tmp : here, 'harness.mjs');
const SCENARIO = path.join(packed ? tmp : here, 'scenario.mjs');

// ---- children: bounded, and killed with this process -------------------------------

const live = new Set();
function killAll() {
  for (const child of live) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

/**
 * Runs a command in its own process group; resolves { code, stdout, stderr, timedOut,
 * lingered }. `lingered`: the child printed its result line but had not exited
 * `EXIT_GRACE_MS` later (then it is killed).
 */
function runChild(command, args, { env, timeoutMs = RUN_TIMEOUT_MS }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    live.add(child);
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let lingered = false;
    let grace;
    const kill = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (grace === undefined && /^MATRIX_RESULT .*\n/m.test(stdout)) {
        grace = setTimeout(() => {
          lingered = true;
          kill();
        }, EXIT_GRACE_MS);
      }
    });
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutMs);
    const done = (code, error) => {
      clearTimeout(timer);
      clearTimeout(grace);
      live.delete(child);
      resolve({ code, stdout, stderr: error ? `${stderr}\n${error.message}` : stderr, timedOut, lingered });
    };
    child.on('error', (error) => done(null, error));
    child.on('close', (code) => done(code));
  });
}

/** Bounds a promise; `cleanup` runs either way. */
async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---- what every runtime must see ----------------------------------------------------

/** The file the package's `exports["."]` gives under `condition`, by Node's own resolver. */
function resolveEntry(condition) {
  const args = ['--input-type=module', '-e', "process.stdout.write(import.meta.resolve('leasehold'))"];
  if (condition) args.unshift(`--conditions=${condition}`);
  const r = spawnSync(process.execPath, args, { cwd: project, encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`resolving leasehold under '${condition}': ${r.stderr}`);
  return fileURLToPath(r.stdout.trim());
}

const exportNames = Object.keys(await import(pathToFileURL(path.join(packageDir, 'lib', 'entries', 'index.mjs')).href))
  .filter((name) => name !== 'default')
  .sort();

function ensureNode(major) {
  if (fs.existsSync(nodeOf(major))) return;
  console.log(`[matrix] installing Node ${major} for the matrix: npm ci --prefix js-tests/matrix/node${major}`);
  const r = spawnSync('npm', ['ci', '--prefix', path.join(here, `node${major}`), '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: 'inherit',
    timeout: 180_000,
  });
  if (r.status !== 0) console.log(`[matrix] npm ci for Node ${major} failed; its runs will fail`);
}

// ---- one run per runtime × engine ---------------------------------------------------

function parseResult(out) {
  const line = out.stdout.split('\n').find((l) => l.startsWith('MATRIX_RESULT '));
  if (!line) {
    const why = out.timedOut ? `timed out after ${RUN_TIMEOUT_MS} ms` : `exit ${out.code}, no result line`;
    const tail = (out.stderr || out.stdout).trim().split('\n').slice(-15).join('\n');
    return { version: undefined, results: [{ name: 'load', ok: false, detail: `${why}\n${tail}` }] };
  }
  return JSON.parse(line.slice('MATRIX_RESULT '.length));
}

function cliRun({ runtime, engine, command, args, specifier, ambientAcrossAwait = true, env = {} }) {
  return {
    runtime,
    engine,
    entry: specifier,
    async run() {
      if (!fs.existsSync(command)) {
        return { results: [{ name: 'load', ok: false, detail: `${command} is not installed: run npm ci` }] };
      }
      const config = { specifier, engine, ambientAcrossAwait, exportNames, packageRoot: pathToFileURL(`${packageDir}/`).href };
      const out = await runChild(command, [...args, HARNESS], {
        env: { ...process.env, ...env, LEASEHOLD_MATRIX_CONFIG: JSON.stringify(config) },
      });
      const outcome = parseResult(out);
      if (outcome.results.every((r) => r.name !== 'load')) {
        outcome.results.push({
          name: 'exits',
          ok: !out.lingered && out.code === 0,
          detail: out.lingered
            ? `still running ${EXIT_GRACE_MS} ms after printing its result: something keeps the event loop alive`
            : `exit code ${out.code}\n${out.stderr.trim().split('\n').slice(-10).join('\n')}`,
        });
      }
      return outcome;
    },
  };
}

function workerdRun() {
  return {
    runtime: 'workerd',
    engine: 'wasm',
    entry: 'leasehold',
    condition: 'workerd',
    async run() {
      const entry = resolveEntry('workerd');
      fs.mkdirSync(tmp, { recursive: true });
      const scriptPath = path.join(tmp, 'worker.mjs');
      const rel = (file) => path.relative(tmp, file).split(path.sep).join('/');
      // miniflare runs workerd without a bundler: the worker imports the file the
      // package's `workerd` condition resolves to, by its path.
      fs.writeFileSync(
        scriptPath,
        [
          '// Generated by js-tests/matrix/run.mjs.',
          `import * as api from '${rel(entry)}';`,
          `import { DurableObjectLockStore } from '${rel(path.join(packageDir, 'lib', 'stores', 'durable-object', 'index.mjs'))}';`,
          `import { prepare, runScenario } from '${rel(SCENARIO)}';`,
          `export { LockDurableObject } from '${rel(path.join(packageDir, 'lib', 'stores', 'durable-object', 'index.mjs'))}';`,
          'const prepared = prepare(api);',
          'export default {',
          '  async fetch(request, env) {',
          '    const config = await request.json();',
          '    // Waits go through a Durable Object: workerd refuses waits on the memory store.',
          '    const waitStore = new DurableObjectLockStore({ namespace: env.LOCKS });',
          '    const results = await runScenario(api, config, { ...prepared, waitStore });',
          '    return Response.json({ results });',
          '  },',
          '};',
          '',
        ].join('\n'),
      );
      const { Miniflare } = await import('miniflare');
      const version = JSON.parse(fs.readFileSync(bin('node_modules', 'workerd', 'package.json'), 'utf8')).version;
      let mf;
      try {
        mf = new Miniflare({
          modules: true,
          scriptPath,
          modulesRoot: project,
          modulesRules: [
            { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
            { type: 'CompiledWasm', include: ['**/*.wasm'] },
          ],
          compatibilityDate: '2025-09-01',
          compatibilityFlags: ['nodejs_compat'],
          durableObjects: { LOCKS: 'LockDurableObject' },
        });
        const config = { engine: 'wasm', ambientAcrossAwait: true, memoryWaits: false, exportNames };
        const response = await withTimeout(
          mf.dispatchFetch('http://matrix.local/', { method: 'POST', body: JSON.stringify(config) }),
          RUN_TIMEOUT_MS,
          'workerd',
        );
        const text = await response.text();
        if (!response.ok) throw new Error(`HTTP ${response.status}: ${text.slice(0, 2000)}`);
        return { version: `workerd ${version}`, entry: path.relative(packageDir, entry), ...JSON.parse(text) };
      } catch (error) {
        return { version: `workerd ${version}`, results: [{ name: 'load', ok: false, detail: String(error?.stack ?? error) }] };
      } finally {
        await mf?.dispose().catch(() => {});
      }
    },
  };
}

const CONTENT_TYPES = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };

/** Serves the page, the package's lib/ and dist/, and the scenario, on 127.0.0.1 only. */
function startServer(page) {
  const allowed = [path.join(packageDir, 'lib'), path.join(packageDir, 'dist'), path.dirname(SCENARIO)].map(
    (dir) => `${path.relative(project, dir).split(path.sep).join('/')}/`,
  );
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return res.end(page);
    }
    const rel = decodeURIComponent(url.pathname).replace(/^\/+/, '');
    const file = path.resolve(project, rel);
    if (!allowed.some((dir) => rel.startsWith(dir)) || !file.startsWith(project + path.sep) || !fs.existsSync(file)) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { 'content-type': CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

function chromiumRun() {
  return {
    runtime: 'Chromium',
    engine: 'wasm',
    entry: 'leasehold',
    condition: 'browser',
    async run() {
      const resolved = resolveEntry('browser');
      const entry = '/' + path.relative(project, resolved).split(path.sep).join('/');
      const scenarioUrl = '/' + path.relative(project, SCENARIO).split(path.sep).join('/');
      const config = { engine: 'wasm', ambientAcrossAwait: false, exportNames };
      // An import map stands in for a bundler: `leasehold` is the file the `browser`
      // condition resolves to.
      const page = `<!doctype html><meta charset="utf-8"><title>leasehold matrix</title>
<script type="importmap">${JSON.stringify({ imports: { leasehold: entry } })}</script>
<script type="module">
import { prepare, runScenario } from '${scenarioUrl}';
window.leaseholdMatrix = import('leasehold').then(
  (api) => runScenario(api, ${JSON.stringify(config)}, prepare(api)),
  (error) => [{ name: 'load', ok: false, detail: String(error && error.stack || error) }],
);
</script>`;
      const { chromium } = await import('playwright-core');
      let server;
      let browser;
      const pageErrors = [];
      try {
        server = await startServer(page);
        browser = await withTimeout(
          chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 }),
          40_000,
          'launching Chromium',
        );
        const tab = await browser.newPage();
        tab.on('pageerror', (error) => pageErrors.push(String(error)));
        await tab.goto(`http://127.0.0.1:${server.address().port}/`, { timeout: 30_000 });
        await tab.waitForFunction(() => window.leaseholdMatrix !== undefined, undefined, { timeout: 30_000 });
        const results = await withTimeout(tab.evaluate(() => window.leaseholdMatrix), RUN_TIMEOUT_MS, 'the scenario in Chromium');
        if (pageErrors.length) results.push({ name: 'pageErrors', ok: false, detail: pageErrors.join('\n') });
        return { version: `Chromium ${browser.version()}`, entry: path.relative(packageDir, resolved).split(path.sep).join('/'), results };
      } catch (error) {
        const detail = [String(error?.stack ?? error), ...pageErrors].join('\n');
        return { version: browser ? `Chromium ${browser.version()}` : undefined, results: [{ name: 'load', ok: false, detail }] };
      } finally {
        await browser?.close().catch(() => {});
        server?.close();
      }
    },
  };
}

ensureNode(22);
ensureNode(24);

const runs = [
  cliRun({ runtime: 'Node 20', engine: 'native', command: process.execPath, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'native' } }),
  cliRun({ runtime: 'Node 20', engine: 'wasm', command: process.execPath, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'wasm' } }),
  cliRun({ runtime: 'Node 22', engine: 'native', command: NODE22, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'native' } }),
  cliRun({ runtime: 'Node 22', engine: 'wasm', command: NODE22, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'wasm' } }),
  cliRun({ runtime: 'Node 24', engine: 'native', command: NODE24, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'native' } }),
  cliRun({ runtime: 'Node 24', engine: 'wasm', command: NODE24, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'wasm' } }),
  cliRun({ runtime: 'Bun', engine: 'native', command: BUN, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'native' } }),
  cliRun({ runtime: 'Bun', engine: 'wasm', command: BUN, args: [], specifier: 'leasehold', env: { LEASEHOLD_ENGINE: 'wasm' } }),
  // Deno picks the `deno` condition (wasm) for `leasehold`; `leasehold/node` is the Node
  // entry, which loads the napi addon with --allow-ffi.
  cliRun({ runtime: 'Deno', engine: 'wasm', command: DENO, args: ['run', '--no-lock', '--no-prompt', '--allow-read', '--allow-env'], specifier: 'leasehold' }),
  cliRun({
    runtime: 'Deno',
    engine: 'native',
    command: DENO,
    args: ['run', '--no-lock', '--no-prompt', '--allow-read', '--allow-env', '--allow-ffi'],
    specifier: 'leasehold/node',
    env: { LEASEHOLD_ENGINE: 'native' },
  }),
  workerdRun(),
  chromiumRun(),
];

// ---- run, print, write RESULTS.md -------------------------------------------------------

const started = Date.now();
const outcomes = new Array(runs.length);
let next = 0;
async function worker() {
  while (next < runs.length) {
    const i = next++;
    const run = runs[i];
    const t0 = Date.now();
    let outcome;
    try {
      outcome = await run.run();
    } catch (error) {
      outcome = { results: [{ name: 'load', ok: false, detail: String(error?.stack ?? error) }] };
    }
    outcome.ms = Date.now() - t0;
    outcome.ok = checkNames.every((name) => outcome.results.some((r) => r.name === name)) && outcome.results.every((r) => r.ok);
    outcomes[i] = outcome;
    const label = `${run.runtime} × ${run.engine}`.padEnd(18);
    const failed = outcome.results.filter((r) => !r.ok);
    console.log(
      `${outcome.ok ? 'ok  ' : 'FAIL'} ${label} ${(outcome.version ?? '').padEnd(22)} ${String(outcome.ms).padStart(6)} ms` +
        (outcome.ok ? '' : `  failed: ${failed.map((r) => r.name).join(', ') || 'incomplete'}`),
    );
    for (const r of failed) console.log(`       ${r.name}: ${r.detail.split('\n').join('\n       ')}`);
  }
}
await Promise.all(Array.from({ length: CONCURRENCY }, worker));

const passed = outcomes.filter((o) => o.ok).length;
let failed = outcomes.length - passed;
if (packed) {
  for (const c of packed.checks) {
    console.log(`${c.ok ? 'ok  ' : 'FAIL'} installed copy: ${c.name}: ${c.detail}`);
    if (!c.ok) failed += 1;
  }
}

const CHECK_TITLES = {
  entry: 'entry & engine',
  exclusion: '20 concurrent, no overlap, tokens increase',
  moduleScope: 'pipeline built at module load',
  rejection: 'fail fast',
  jsStore: 'JS store called back',
  loss: 'loss aborts signal',
  ambient: 'getLockToken()',
  callerContext: "callback in the caller's async context",
  exits: 'process exits on its own',
};
const columns = [...checkNames, 'exits'];
let size;
try {
  size = JSON.parse(fs.readFileSync(path.join(packageDir, 'dist', 'wasm', 'size.json'), 'utf8'));
} catch {
  size = undefined;
}
const kb = (bytes) => `${(bytes / 1024).toFixed(1)} KB`;
const lines = [
  `<!-- Generated by \`node js-tests/matrix/run.mjs${packed ? ' --pack' : ''}\`; do not edit by hand. -->`,
  '',
  ...(packed
    ? [`Run against the packed package (\`npm pack\`, with \`@leasehold/${packed.triple}\`) installed in a fresh project.`, '']
    : []),
  `| Runtime | Engine | Loaded as | ${columns.map((n) => CHECK_TITLES[n] ?? n).join(' | ')} |`,
  `| --- | --- | --- | ${columns.map(() => ':---:').join(' | ')} |`,
];
runs.forEach((run, i) => {
  const o = outcomes[i];
  const cells = columns.map((name) => {
    const r = o.results.find((x) => x.name === name);
    if (!r) return '–';
    if (!r.ok) return '✗';
    if (name === 'ambient') return /across await/.test(r.detail) ? '✓ across await' : '✓ sync part only';
    if (name === 'callerContext') return /no AsyncLocalStorage/.test(r.detail) ? '–' : /no waits/.test(r.detail) ? '✓ free key' : '✓';
    return '✓';
  });
  const how = `\`${run.entry}\`${run.condition ? ` (\`${run.condition}\` condition)` : ''}${o.entry ? ` → \`${o.entry}\`` : ''}`;
  lines.push(`| ${o.version ?? run.runtime} | ${run.engine} | ${how} | ${cells.join(' | ')} |`);
});
lines.push(
  '',
  `${passed} of ${outcomes.length} runtime × engine combinations pass every check (–: not applicable;`,
  'workerd and Chromium run in a host process, not a process of their own).',
  '`getLockToken()`: "across await" means the ambient token survives `await` (AsyncLocalStorage);',
  '"sync part only" means it is there in the synchronous part of the callback and `undefined` after',
  'its first `await` (browsers), while `getLockToken(context)` works until the execution',
  'settles (after that it is `undefined`; `context.properties` keeps the token).',
  "Callback in the caller's async context: the user's own AsyncLocalStorage reads, inside a callback,",
  'what it read where `execute()` was called, also when another caller\'s release granted the lock',
  '(–: no AsyncLocalStorage; workerd: free key only, as memory waits are refused there).',
);
lines.push(
  '',
  'workerd: the 20 concurrent executions wait through `DurableObjectLockStore`. A lock that would wait',
  'on the memory store throws a TypeError there at once: workerd cancels a request that waits for a',
  "lock another request holds. Fail fast (`wait: 0`) works on the memory store in every runtime.",
);
if (size) {
  lines.push(
    '',
    `wasm module: ${kb(size.wasmBytes)}, ${kb(size.gzipBytes)} gzipped (budget ${kb(size.budgetGzipBytes)}).`,
  );
}
fs.writeFileSync(path.join(here, 'RESULTS.md'), `${lines.join('\n')}\n`);

// The README's runtime table is this result, pasted between its markers: what the
// matrix proved on the last run, never typed by hand.
const readmePath = path.join(root, 'README.md');
const readme = fs.readFileSync(readmePath, 'utf8');
const start = '<!-- runtime-table:start -->';
const end = '<!-- runtime-table:end -->';
const from = readme.indexOf(start);
const to = readme.indexOf(end);
if (from >= 0 && to > from) {
  const updated = `${readme.slice(0, from + start.length)}\n${lines.join('\n')}\n${readme.slice(to)}`;
  if (updated !== readme) fs.writeFileSync(readmePath, updated);
}

console.log(`[matrix] wrote js-tests/matrix/RESULTS.md in ${((Date.now() - started) / 1000).toFixed(1)} s`);
console.log(`matrix: ${passed} passed, ${failed} failed`);
if (packed) {
  // Kept when something failed, to look into.
  if (failed === 0) fs.rmSync(project, { recursive: true, force: true });
  else console.log(`[matrix] the installed copy is kept in ${project}`);
}
process.exitCode = failed === 0 ? 0 : 1;
