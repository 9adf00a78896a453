// Every mainstream bundler takes the package as a user installs it, with its documented
// defaults or the one line of config the README gives, and the page it builds runs in
// headless Chromium (one launch for all): Vite, webpack 5 and Rollup copy the wasm module
// the browser entry names; with esbuild the app imports the module's URL and passes it
// to init(). The wasm module stays within its gzipped budget.
//
// The bundles are the same on both engines (a browser always runs wasm): this file runs
// on the wasm pass of the suite.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { chromiumMissing, launchChromium } from './support/chromium.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const fixture = fileURLToPath(new URL('./bundlers/', import.meta.url));

const skip =
  process.env.LEASEHOLD_ENGINE === 'native'
    ? 'browsers run the wasm engine: runs on the wasm pass'
    : chromiumMissing;

const bin = (name) => path.join(root, 'node_modules', '.bin', name);

/** Runs a bundler's command in `cwd`; rejects with its output unless it exits 0 in time. */
function run(command, args, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${path.basename(command)} ${args.join(' ')}: ${signal ?? `exit ${code}`}\n${output}`));
    });
  });
}

/**
 * An app project in a temporary folder: the fixture's files, and leasehold in its
 * node_modules as npm installs it (its `files`, not the repository). The Rollup config's
 * plugins are linked from the repository's node_modules.
 */
function makeProject(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `leasehold-${name}-`));
  fs.cpSync(fixture, dir, { recursive: true });
  const pkg = path.join(dir, 'node_modules', 'leasehold');
  fs.mkdirSync(pkg, { recursive: true });
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  fs.copyFileSync(path.join(root, 'package.json'), path.join(pkg, 'package.json'));
  for (const entry of manifest.files) {
    // The native addon plays no part in a browser bundle.
    fs.cpSync(path.join(root, entry), path.join(pkg, entry), { recursive: true, filter: (src) => !src.endsWith('.node') });
  }
  for (const plugin of ['@rollup/plugin-node-resolve', '@web/rollup-plugin-import-meta-assets']) {
    const link = path.join(dir, 'node_modules', plugin);
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.symlinkSync(path.join(root, 'node_modules', plugin), link, 'dir');
  }
  return dir;
}

/** A page that loads the bundle the way its bundler's docs say. */
const page = (script) =>
  `<!doctype html><meta charset="utf-8"><title>leasehold bundled</title><link rel="icon" href="data:,">${script}`;

const BUNDLERS = {
  // `vite build`: no config; index.html names the app's entry.
  async vite(dir) {
    await run(bin('vite'), ['build', '--logLevel', 'warn'], dir);
    return { out: path.join(dir, 'dist'), html: fs.readFileSync(path.join(dir, 'dist', 'index.html'), 'utf8') };
  },
  // `webpack`: no config; its defaults build src/index.js into dist/main.js.
  async webpack(dir) {
    await run(bin('webpack'), ['--mode', 'production'], dir);
    return { out: path.join(dir, 'dist'), html: page('<script src="/main.js"></script>') };
  },
  // `rollup -c` with the fixture's rollup.config.mjs (importMetaAssets() is the one line for leasehold).
  async rollup(dir) {
    await run(bin('rollup'), ['-c', '--silent'], dir);
    return { out: path.join(dir, 'dist'), html: page('<script type="module" src="/index.js"></script>') };
  },
  // esbuild's defaults (iife, browser platform) plus the file loader for .wasm.
  async esbuild(dir) {
    await run(bin('esbuild'), ['src/esbuild.js', '--bundle', '--outdir=dist', '--loader:.wasm=file', '--log-level=error'], dir);
    return { out: path.join(dir, 'dist'), html: page('<script src="/esbuild.js"></script>') };
  },
};

const CONTENT_TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };

/** Serves `html` at / and the files of `out` on 127.0.0.1 (a secure context); records what was asked. */
function serve(out, html) {
  const asked = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    asked.push(url.pathname);
    if (url.pathname === '/' || url.pathname === '/index.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return res.end(html);
    }
    const file = path.resolve(out, decodeURIComponent(url.pathname).replace(/^\/+/, ''));
    if (!file.startsWith(out + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { 'content-type': CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${server.address().port}/`, asked, server }));
  });
}

describe('bundled pages in headless Chromium', { skip }, () => {
  let browser;
  const projects = [];

  before(async () => {
    browser = await launchChromium({ timeout: 60_000 });
  });
  after(async () => {
    await browser?.close();
    for (const dir of projects) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Opens `url` in a new tab; what the page's scenario resolved to, checked. */
  async function runPage(url) {
    const tab = await browser.newPage();
    const problems = [];
    tab.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
    tab.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(`console: ${message.text()}`);
    });
    try {
      await tab.goto(url, { timeout: 30_000 });
      await tab.waitForFunction(() => window.bundleResult !== undefined, undefined, { timeout: 30_000 });
      const result = await tab.evaluate(() => window.bundleResult);
      assert.equal(result.error, undefined, result.error);
      assert.deepEqual(problems, []);
      assert.equal(result.engine, 'wasm');
      assert.equal(result.maxInside, 1, 'never two callbacks at once');
      assert.equal(result.tokens.length, 5);
      for (let i = 1; i < 5; i++) assert.ok(result.tokens[i] > result.tokens[i - 1], `tokens ${result.tokens}`);
      assert.equal(result.failFast, 'LOCK_NOT_ACQUIRED');
      return result;
    } finally {
      await tab.close();
    }
  }

  for (const [name, build] of Object.entries(BUNDLERS)) {
    it(`${name}: the bundled page loads the wasm engine and its locks take turns`, async (t) => {
      const dir = makeProject(name);
      projects.push(dir);
      const t0 = Date.now();
      const { out, html } = await build(dir);
      const emitted = fs.readdirSync(out, { recursive: true }).filter((file) => String(file).endsWith('.wasm'));
      t.diagnostic(`${name} built in ${Date.now() - t0} ms; wasm files: ${emitted.join(', ')}`);
      assert.equal(emitted.length, 1, `${name} emits the wasm module once: ${emitted.join(', ')}`);

      const { url, asked, server } = await serve(out, html);
      try {
        const result = await runPage(url);
        // The module came from the bundle's own output, once.
        assert.deepEqual(result.wasm, [`/${emitted[0].split(path.sep).join('/')}`]);
        assert.deepEqual(asked.filter((p) => p.endsWith('.wasm')), result.wasm);
      } finally {
        server.close();
      }
    });
  }

  it("vite's dev server: the page loads the package's own wasm file, with no config", async () => {
    const dir = makeProject('vite-dev');
    projects.push(dir);
    const vite = spawn(bin('vite'), ['--host', '127.0.0.1', '--port', '0'], {
      cwd: dir,
      env: { ...process.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = await new Promise((resolve, reject) => {
        let output = '';
        const timer = setTimeout(() => reject(new Error(`vite printed no URL:\n${output}`)), 30_000);
        const read = (chunk) => {
          output += chunk;
          const found = output.match(/http:\/\/127\.0\.0\.1:\d+\//);
          if (found) {
            clearTimeout(timer);
            resolve(found[0]);
          }
        };
        vite.stdout.on('data', read);
        vite.stderr.on('data', read);
        vite.on('exit', (code) => reject(new Error(`vite exited (${code}):\n${output}`)));
      });
      const result = await runPage(url);
      assert.deepEqual(result.wasm, ['/node_modules/leasehold/dist/wasm/leasehold_wasm_bg.wasm']);
    } finally {
      vite.kill('SIGTERM');
    }
  });
});

it('the wasm module the browser loads stays within the budget scripts/build-wasm.sh sets', { skip: process.env.LEASEHOLD_ENGINE === 'native' && 'runs on the wasm pass' }, () => {
  const dir = path.join(root, 'dist', 'wasm');
  const { budgetGzipBytes } = JSON.parse(fs.readFileSync(path.join(dir, 'size.json'), 'utf8'));
  const gzipped = zlib.gzipSync(fs.readFileSync(path.join(dir, 'leasehold_wasm_bg.wasm')), { level: 9 }).length;
  assert.ok(gzipped <= budgetGzipBytes, `${gzipped} bytes gzipped, over the budget of ${budgetGzipBytes}`);
});
