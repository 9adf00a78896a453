'use strict';
// Loads the native addon for this platform, first found wins:
//   1. dist/leasehold.<triple>.node: an addon built in a clone of the repository
//      (scripts/build.sh). The published package leaves it out.
//   2. the `@leasehold/<triple>` package, an optional dependency of leasehold that npm
//      installs only on the platform it matches (its os, cpu and libc fields).
// Neither: it throws an Error whose message says why, which index.cjs publishes as
// `engineFallbackReason` when it falls back to wasm.
const fs = require('node:fs');
const path = require('node:path');

function libc() {
  // musl systems say so in their ldd; reading it needs no special permission (Deno
  // gates process.report behind --allow-sys).
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? 'musl' : 'gnu';
  } catch {
    return process.report?.getReport?.()?.header?.glibcVersionRuntime ? 'gnu' : 'musl';
  }
}

/** This platform's name as the platform packages use it: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
function platformTriple() {
  const base = `${process.platform}-${process.arch}`;
  if (process.platform === 'linux') return `${base}-${libc()}`;
  if (process.platform === 'win32') return `${base}-msvc`;
  return base;
}

/** The addon's file name, in dist/ of a clone and in its platform package. */
function addonFile(triple = platformTriple()) {
  return `leasehold.${triple}.node`;
}

/** Requires the addon from the first place that has one; throws saying why none loaded. */
function requireAddon() {
  const triple = platformTriple();
  const built = path.join(__dirname, '..', '..', 'dist', addonFile(triple));
  if (fs.existsSync(built)) return require(built);
  const name = `@leasehold/${triple}`;
  let resolved;
  try {
    resolved = require.resolve(name);
  } catch {
    // The published manifest names every platform package (scripts/pack.mjs adds them);
    // a clone of the repository has their folders in npm/.
    const published =
      Object.hasOwn(require('../../package.json').optionalDependencies ?? {}, name) ||
      fs.existsSync(path.join(__dirname, '..', '..', 'npm', triple, 'package.json'));
    throw new Error(
      published
        ? `${name} is not installed (npm skips it when optional dependencies are omitted: install again without --omit=optional)`
        : `no native addon is published for ${triple}`,
    );
  }
  try {
    return require(resolved);
  } catch (error) {
    throw new Error(`${name} did not load: ${error?.message ?? error}`, { cause: error });
  }
}

/**
 * The native binding: its Engine class, its duration check, and the addon, whose fast
 * paths lib/host/fast-calls.cjs installs.
 */
function load() {
  const addon = requireAddon();
  return { Engine: addon.NativeEngine, checkDuration: addon.checkDuration, addon };
}

module.exports = { load, addonFile, platformTriple };
