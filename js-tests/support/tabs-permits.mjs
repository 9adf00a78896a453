// What the tabs permit tests (tabs-permits, tabs-limits) share: a page with
// js-tests/tabs/permits.mjs loaded, the grants it was handed, and rising tokens.
import assert from 'node:assert/strict';

/** A page of `pages` (a TabPages) with permits.mjs loaded; `call(method, args)` runs one of its functions. */
export async function openPermitsPage(pages) {
  const page = await pages.open();
  await page.evaluate(async () => {
    window.permits = await import('./permits.mjs');
  });
  return { page, call: (method, args) => page.evaluate(([m, a]) => window.permits[m](a), [method, args]) };
}

/** Resolves once the page's grants on `key` number `n`: those grants. */
export async function grantsReach({ page, call }, key, n) {
  await page.waitForFunction(([k, count]) => window.permits.grantsOf(k).length >= count, [key, n], { timeout: 15_000 });
  return call('grantsOf', key);
}

export function assertRising(tokens, what) {
  for (const t of tokens) assert.ok(Number.isSafeInteger(t), `${what}: ${tokens.join(', ')}`);
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${what}: ${tokens.join(', ')}`);
}

/**
 * Whoever went in after another came out has a larger token: `log` as `Inside` keeps it
 * (each leave is reported before the lease is let go, each enter after the grant).
 */
export function assertFenced(log) {
  let left = 0;
  for (const { event, token } of log) {
    if (event === 'leave') left = Math.max(left, token);
    else assert.ok(token > left, `token ${token} after ${left} came out: ${JSON.stringify(log)}`);
  }
}

/**
 * What the pages' pipelines report (`window.report`, exposed on each page by `watch`):
 * who is inside with which weight or mode, the most weight inside at once, and the
 * violations (more than `limit` inside; a writer with anyone).
 */
export class Inside {
  now = new Map(); // name -> weight or mode
  log = [];
  violations = 0;
  most = 0;

  constructor(limit = Infinity) {
    this.limit = limit;
  }

  async watch(...pages) {
    for (const { page } of pages) await page.exposeFunction('report', (event, name, as, token) => this.#report(event, name, as, token));
  }

  #report(event, name, as, token) {
    this.log.push({ event, name, token });
    if (event === 'leave') return void this.now.delete(name);
    const there = [...this.now.values()];
    if (there.length > 0 && (as === 'exclusive' || there.includes('exclusive'))) this.violations += 1;
    this.now.set(name, as);
    const weight = [...this.now.values()].reduce((sum, w) => sum + (typeof w === 'number' ? w : 1), 0);
    if (weight > this.limit) this.violations += 1;
    this.most = Math.max(this.most, weight);
  }
}
