'use strict';
// Loads the prebuilt native addon for this platform, or throws when there is none.
const path = require('node:path');

function abiSuffix() {
  if (process.platform !== 'linux') return '';
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : undefined;
  const glibc = report?.header?.glibcVersionRuntime;
  return glibc ? '-gnu' : '-musl';
}

function addonFile() {
  return `leasehold.${process.platform}-${process.arch}${abiSuffix()}.node`;
}

function load() {
  const addon = require(path.join(__dirname, '..', 'dist', addonFile()));
  return { Engine: addon.NativeEngine, checkDuration: addon.checkDuration };
}

module.exports = { load, addonFile };
