// Headless Chromium for the tests that drive a page (examples.test.mjs, matrix/run.mjs).

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
