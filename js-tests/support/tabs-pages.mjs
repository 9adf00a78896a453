// Pages of one origin in headless Chromium for the TabLockStore tests (tabs-store,
// tabs-permits): a server for the repository's lib/, dist/ and js-tests/tabs/ on
// 127.0.0.1, and js-tests/tabs/page.html opened in a browser context of the test's.
// The browser only has the wasm engine: these tests run in the wasm pass of the suite.
import { createReadStream, existsSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromiumMissing, launchChromium } from './chromium.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Why the tabs tests are skipped here, or false. */
export const tabsSkip =
  process.env.LEASEHOLD_ENGINE === 'native'
    ? 'browsers run the wasm engine only: these tests run in the wasm pass'
    : chromiumMissing
      ? chromiumMissing
      : !existsSync(path.join(root, 'dist/wasm/leasehold_wasm_bg.wasm'))
          ? 'the wasm engine is not built (npm run build)'
          : false;

const TYPES = { '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm' };
const SERVED = ['lib/', 'dist/', 'js-tests/tabs/'];

function serve() {
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname).replace(/^\/+/, '');
    const file = path.resolve(root, rel);
    if (!SERVED.some((dir) => rel.startsWith(dir)) || !file.startsWith(root) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/**
 * The server and browser of one test file: `start()` in `before`, `stop()` in `after`,
 * `fresh()` in `beforeEach` (a new context: its own origin storage and lock manager),
 * `open()` a page of that context, ready. `problems` collects the pages' uncaught errors.
 */
export class TabPages {
  problems = [];
  #server;
  #browser;
  #context;
  #url;

  async start() {
    this.#server = await serve();
    this.#url = `http://127.0.0.1:${this.#server.address().port}/js-tests/tabs/page.html`;
    this.#browser = await launchChromium();
  }

  async stop() {
    await this.#browser?.close();
    this.#server?.close();
  }

  async fresh() {
    await this.#context?.close();
    this.#context = await this.#browser.newContext();
    this.problems.length = 0;
  }

  async open() {
    const page = await this.#context.newPage();
    page.on('pageerror', (error) => this.problems.push(`pageerror: ${error.message}`));
    await page.goto(this.#url);
    await page.waitForFunction(() => window.ready === true, undefined, { timeout: 15_000 });
    return page;
  }
}

/**
 * Resolves once `fn(arg)`, run in `page`, resolves truthy (its value); asked every 20 ms,
 * a TimeoutError after `timeout` ms. (`page.waitForFunction` takes a returned promise
 * for a truthy value at once: it cannot wait on an async check.)
 */
export async function pageUntil(page, fn, arg, { timeout = 15_000 } = {}) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await page.evaluate(fn, arg);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting in the page for ${fn}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
