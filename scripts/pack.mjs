// Packs leasehold as it is published: the repository's files, with a package.json whose
// optionalDependencies name every platform package in npm/ (napi-rs's layout). The
// repository's own package.json lists none: they are not published while it is
// developed, and `npm ci` refuses a lock file that lacks them.
//   node scripts/pack.mjs [destination]   writes leasehold-<version>.tgz, prints its path
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function npm(args, cwd) {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: 180_000 });
  if (r.status !== 0) throw new Error(`npm ${args.join(' ')} (in ${cwd}) failed: exit ${r.status}\n${r.stderr || r.stdout}`);
  return r.stdout;
}

/** The published manifest: the repository's, with the platform packages as optional dependencies. */
export function publishedManifest() {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const platforms = fs
    .readdirSync(path.join(root, 'npm'))
    .filter((dir) => fs.existsSync(path.join(root, 'npm', dir, 'package.json')))
    .sort();
  manifest.optionalDependencies = Object.fromEntries(platforms.map((dir) => [`@leasehold/${dir}`, manifest.version]));
  return manifest;
}

/** `npm pack` of the published form into `destination`: { file, size, files, manifest }. */
export function packMain(destination) {
  const [listing] = JSON.parse(npm(['pack', '--dry-run', '--json', '--ignore-scripts'], root));
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'leasehold-stage-'));
  try {
    for (const { path: file } of listing.files) {
      fs.mkdirSync(path.dirname(path.join(stage, file)), { recursive: true });
      fs.copyFileSync(path.join(root, file), path.join(stage, file));
    }
    const manifest = publishedManifest();
    fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    const [info] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', destination], stage));
    return { file: path.join(destination, info.filename), size: info.size, files: info.files.map((f) => f.path), manifest };
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const destination = path.resolve(process.argv[2] ?? '.');
  console.log(packMain(destination).file);
}
