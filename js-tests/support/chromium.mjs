// Headless Chromium for the tests that drive a page (examples, bundlers, tabs-store, the
// matrix), through playwright-core.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

/** Chromium flags for a headless, hermetic run (shared/TOOLCHAIN.md). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium, which `npm run setup` installs. */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

const require = createRequire(import.meta.url);
let loaded;
try {
  loaded = require('playwright-core');
} catch {
  loaded = undefined;
}
/** playwright-core, or undefined where it is not installed. */
export const playwright = loaded;

/** Why a test that drives Chromium cannot run here, or false when it can. */
export const chromiumMissing = !playwright
  ? 'playwright-core is not installed'
  : !existsSync(CHROMIUM)
    ? `${CHROMIUM} is not installed (npm run setup installs it)`
    : false;

/** Launches headless Chromium with CHROMIUM_ARGS. */
export function launchChromium({ timeout = 30_000 } = {}) {
  return playwright.chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout });
}
