// The package as users get it: `npm pack` of leasehold and of this machine's platform
// package (npm/<triple>/), both installed into a fresh project outside the repository.
// `node js-tests/matrix/run.mjs --pack` (what `npm test` runs) then runs the runtime
// matrix against that installed copy instead of the working tree.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { packMain } from '../../scripts/pack.mjs';

const require = createRequire(import.meta.url);

function run(command, args, cwd) {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 180_000 });
  if (r.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: exit ${r.status}\n${r.stderr || r.stdout}`);
  }
  return r.stdout.trim();
}

/** `npm pack` of `dir` into `destination`; resolves to the tarball's path. */
function pack(dir, destination) {
  const [info] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', destination], dir));
  return { file: path.join(destination, info.filename), size: info.size, files: info.files.map((f) => f.path) };
}

/**
 * Packs and installs; returns { project, packageDir, triple, checks } where `checks` are
 * [{ name, ok, detail }] about the tarballs and the engine an installed copy picks.
 * By default for this machine; `triple` with `npmArgs` (e.g. `--cpu=arm64`) and `node`
 * (a command that runs a Node of that platform, e.g. under qemu) for another one.
 */
export function installPacked(root, { triple: wanted, npmArgs = [], node = [process.execPath] } = {}) {
  const { platformTriple, addonFile } = require(path.join(root, 'lib', 'entries', 'native.cjs'));
  const triple = wanted ?? platformTriple();
  const platformDir = path.join(root, 'npm', triple);
  if (!fs.existsSync(path.join(platformDir, addonFile(triple)))) {
    throw new Error(`npm/${triple}/${addonFile(triple)} is missing: run scripts/build.sh first`);
  }
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'leasehold-pack-'));
  fs.writeFileSync(
    path.join(project, 'package.json'),
    `${JSON.stringify({ name: 'leasehold-pack-test', private: true, type: 'module' }, null, 2)}\n`,
  );
  const main = packMain(project);
  const platform = pack(platformDir, project);
  // Offline: the platform packages of other machines are optional dependencies that are
  // not in the cache, and npm skips them as it would skip ones that do not match.
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--no-package-lock', ...npmArgs, main.file, platform.file], project);

  const packageDir = path.join(project, 'node_modules', 'leasehold');
  const { manifest } = main;
  const checks = [];
  const check = (name, fn) => {
    try {
      checks.push({ name, ok: true, detail: fn() });
    } catch (error) {
      checks.push({ name, ok: false, detail: String(error?.message ?? error) });
    }
  };
  const assert = (condition, message) => {
    if (!condition) throw new Error(message);
  };

  check('tarballs', () => {
    assert(!main.files.some((f) => f.endsWith('.node')), `the main tarball carries a native addon: ${main.files.filter((f) => f.endsWith('.node'))}`);
    assert(main.files.includes('LICENSE'), 'the main tarball has no LICENSE');
    assert(platform.files.includes(addonFile(triple)), `@leasehold/${triple} lacks ${addonFile(triple)}`);
    assert(platform.files.includes('LICENSE'), `@leasehold/${triple} has no LICENSE`);
    const wanted = manifest.optionalDependencies?.[`@leasehold/${triple}`];
    assert(wanted === manifest.version, `optionalDependencies['@leasehold/${triple}'] is ${wanted}, expected ${manifest.version}`);
    for (const name of Object.keys(manifest.optionalDependencies ?? {})) {
      const dir = path.join(root, 'npm', name.replace('@leasehold/', ''));
      const own = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
      assert(own.name === name && own.version === manifest.version, `npm/${path.basename(dir)} is ${own.name}@${own.version}`);
    }
    const kb = (bytes) => `${(bytes / 1024).toFixed(0)} kB`;
    return `leasehold ${kb(main.size)} (${main.files.length} files), @leasehold/${triple} ${kb(platform.size)}`;
  });

  // The engine an installed copy picks without LEASEHOLD_ENGINE, with its platform
  // package and without it.
  const probe = () => {
    const env = { ...process.env };
    delete env.LEASEHOLD_ENGINE;
    const source = "const l = await import('leasehold'); console.log(JSON.stringify({ engine: l.engine, reason: l.engineFallbackReason ?? null }));";
    const r = spawnSync(node[0], [...node.slice(1), '--input-type=module', '-e', source], { cwd: project, env, encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) throw new Error(`loading leasehold failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  check('picks the platform package', () => {
    const seen = probe();
    assert(seen.engine === 'native' && seen.reason === null, `got ${JSON.stringify(seen)}`);
    return `engine native from @leasehold/${triple}`;
  });
  check('falls back to wasm, saying why', () => {
    const installed = path.join(project, 'node_modules', '@leasehold', triple);
    const aside = `${installed}.aside`;
    fs.renameSync(installed, aside);
    try {
      const seen = probe();
      assert(seen.engine === 'wasm', `engine ${seen.engine} without the platform package`);
      assert(seen.reason?.includes(`@leasehold/${triple} is not installed`), `engineFallbackReason: ${seen.reason}`);
      return `engine wasm, engineFallbackReason: ${seen.reason}`;
    } finally {
      fs.renameSync(aside, installed);
    }
  });
  return { project, packageDir, triple, checks };
}
