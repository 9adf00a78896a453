// A Worker with the `LOCKS` Durable Object binding, in workerd through miniflare, for the
// Durable Object tests. workerd runs the wasm engine only: on the native pass, without
// miniflare or without a wasm build these tests are skipped, saying which.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../..', import.meta.url));

let Miniflare;
try {
  ({ Miniflare } = await import('miniflare'));
} catch {
  Miniflare = undefined;
}

/** Why the workerd tests are skipped here, or false. */
export const workerdSkip =
  process.env.LEASEHOLD_ENGINE === 'native'
    ? 'workerd runs the wasm engine only: these tests run in the wasm pass'
    : !Miniflare
      ? 'miniflare is not installed'
      : !existsSync(path.join(root, 'dist/wasm/leasehold_wasm_bg.wasm'))
        ? 'the wasm engine is not built (npm run build)'
        : false;

/**
 * Starts the Worker of `options` (`scriptPath`, and `script` for an inline entry; paths
 * from the repository's root) and resolves it once it is ready. `commonJs`: `.cjs`
 * files load as CommonJS modules.
 */
export async function startLockWorker({ commonJs = false, ...options }) {
  const mf = new Miniflare({
    modules: true,
    modulesRoot: root,
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
      ...(commonJs ? [{ type: 'CommonJS', include: ['**/*.cjs'] }] : []),
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: '2025-09-01',
    compatibilityFlags: ['nodejs_compat'],
    durableObjects: { LOCKS: 'LockDurableObject' },
    ...options,
    scriptPath: path.join(root, options.scriptPath),
  });
  await mf.ready;
  return mf;
}
