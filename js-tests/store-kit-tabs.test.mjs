// The store kit (`leasehold/testing`) on TabLockStore in headless Chromium: the page runs
// js-tests/tabs/kit-runner.mjs, which registers the kit's cases with a `test` of its own;
// each case here runs one of them there. The kit is CommonJS: this test's server bundles
// it for the browser with esbuild. Browsers run the wasm engine only: the wasm pass runs these.
import assert from 'node:assert/strict';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import esbuild from 'esbuild';
import kit from '../lib/testing/kit.cjs';
import { chromiumMissing, launchChromium } from './support/chromium.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const skip =
  process.env.LEASEHOLD_ENGINE === 'native'
    ? 'browsers run the wasm engine only: these tests run in the wasm pass'
    : chromiumMissing ||
      (!existsSync(path.join(root, 'dist/wasm/leasehold_wasm_bg.wasm')) ? 'the wasm engine is not built (npm run build)' : false);

// The package's browser entries, found through its exports; the page imports them by
// these names, redirected to the files (so their own relative imports resolve).
const { exports } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const REDIRECTS = { 'leasehold.mjs': exports['.'].browser, 'leasehold-tabs.mjs': exports['./tabs'].default };

const TYPES = { '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
const SERVED = ['lib/', 'dist/', 'js-tests/tabs/'];

async function serve() {
  const bundled = await esbuild.build({
    entryPoints: [path.join(root, 'lib/testing/kit.cjs')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
  });
  const kitSource = bundled.outputFiles[0].text;
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname).replace(/^\/+/, '');
    if (REDIRECTS[rel]) return res.writeHead(302, { location: REDIRECTS[rel].replace(/^\./, '') }).end();
    if (rel === 'kit.mjs') return res.writeHead(200, { 'content-type': TYPES['.mjs'] }).end(kitSource);
    if (rel === '') return res.writeHead(200, { 'content-type': TYPES['.html'] }).end('<!doctype html><title>kit</title>');
    const file = path.resolve(root, rel);
    if (!SERVED.some((dir) => rel.startsWith(dir)) || !file.startsWith(root) || !existsSync(file)) return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    return createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

let server;
let browser;
let page;
const problems = [];
before(async () => {
  if (skip) return;
  server = await serve();
  browser = await launchChromium();
  page = await browser.newPage();
  page.on('pageerror', (error) => problems.push(String(error)));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.evaluate(async () => {
    window.kit = await import('/js-tests/tabs/kit-runner.mjs');
  });
});
after(async () => {
  await browser?.close();
  server?.close();
});

for (const [i, { name }] of kit.CASES.entries()) {
  test(`TabLockStore: ${name}`, { skip, timeout: 60_000 }, async (t) => {
    const outcome = await page.evaluate((index) => window.kit.run(index), i);
    assert.deepEqual(problems, []);
    if (outcome.skipped) return t.skip(outcome.skipped);
    assert.ok(outcome.passed, outcome.error);
  });
}
