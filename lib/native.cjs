'use strict';
// Loads the prebuilt native addon for this platform, or throws when there is none.
const path = require('node:path');

function abiSuffix() {
  if (process.platform !== 'linux') return '';
  // musl systems say so in their ldd; reading it needs no special permission (Deno
  // gates process.report behind --allow-sys).
  try {
    return require('node:fs').readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? '-musl' : '-gnu';
  } catch {
    const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime;
    return glibc ? '-gnu' : '-musl';
  }
}

function addonFile() {
  return `leasehold.${process.platform}-${process.arch}${abiSuffix()}.node`;
}

function load() {
  const addon = require(path.join(__dirname, '..', 'dist', addonFile()));
  return { Engine: addon.NativeEngine, checkDuration: addon.checkDuration };
}

module.exports = { load, addonFile };
