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
  // The calls of every execution are plain N-API callbacks (bindings-node/src/fast.rs),
  // cheaper than napi-rs methods; an engine takes them once enabled.
  const Native = addon.NativeEngine;
  Object.defineProperties(Native.prototype, {
    startDefined: { value: addon.fastStartDefined, writable: true, configurable: true },
    finish: { value: addon.fastFinish, writable: true, configurable: true },
    token: { value: addon.fastToken, writable: true, configurable: true },
    layerOwner: { value: addon.fastLayerOwner, writable: true, configurable: true },
    answerAcquire: { value: addon.fastAnswerAcquire, writable: true, configurable: true },
    answerRelease: { value: addon.fastAnswerRelease, writable: true, configurable: true },
  });
  function Engine(fake, start, seed) {
    const engine = new Native(fake, start, seed);
    addon.enableFast(engine);
    return engine;
  }
  Engine.prototype = Native.prototype;
  return { Engine, checkDuration: addon.checkDuration };
}

module.exports = { load, addonFile };
