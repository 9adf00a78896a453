// The contract model's long run (`npm run soak`): each engine on fake and real time, in
// processes of their own, each for LEASEHOLD_MODEL_SOAK_MS (default 60 s) from a random
// seed (LEASEHOLD_MODEL_SEED to repeat one). Exits 1 on the first failure it prints.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('./main.mjs', import.meta.url));
const ms = String(process.env.LEASEHOLD_MODEL_SOAK_MS ?? 60_000);
for (const engine of ['native', 'wasm']) {
  for (const clock of ['fake', 'real']) {
    const seed = process.env.LEASEHOLD_MODEL_SEED ?? String(Math.floor(Math.random() * 2 ** 31));
    console.log(`[model soak] ${engine}, ${clock} time, seed ${seed}, ${ms} ms`);
    const run = spawnSync(process.execPath, [MAIN, '--clock', clock, '--seed', seed, '--ms', ms], {
      stdio: 'inherit',
      env: { ...process.env, LEASEHOLD_ENGINE: engine },
    });
    if (run.status !== 0) process.exit(1);
  }
}
