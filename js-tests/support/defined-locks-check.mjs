// Runs js-tests/support/defined-locks.mjs in a process of its own (with --expose-gc) and
// judges its rounds: the engine holds no defined lock after a gc, the process's memory
// comes back, and a second round does not grow it (on wasm, whose memory never shrinks,
// the wasm memory must not grow at all).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('./defined-locks.mjs', import.meta.url));
const MiB = 1024 * 1024;

/** Resolves to `{ rounds, problems }`: the printed rounds, and each bound they broke. */
export function runDefinedLockRounds({ engine, rounds, pipelines, keyBytes = 64 * 1024 }) {
  const child = spawnSync(process.execPath, ['--expose-gc', script, String(rounds), String(pipelines), String(keyBytes)], {
    env: { ...process.env, LEASEHOLD_ENGINE: engine },
    encoding: 'utf8',
    timeout: 600_000,
  });
  const printed = child.stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
  const problems = [];
  if (child.status !== 0 || printed.length !== rounds + 1) {
    problems.push(`the run failed (status ${child.status}): ${child.stderr.slice(-2000)}`);
    return { rounds: printed, problems };
  }
  const [warm, first, ...later] = printed;
  if (engine === 'wasm' && typeof first.wasmBytes !== 'number') {
    problems.push('the wasm memory was not found, so its growth cannot be checked');
  }
  for (const r of printed) if (r.defined !== 0) problems.push(`round ${r.round}: ${r.defined} locks still defined after gc`);
  // Twice the key bytes of one round would be kept without the fix; the bound is far below.
  const firstBound = Math.min(96 * MiB, (pipelines * keyBytes) / 2);
  if (first.rss - warm.rss > firstBound) {
    problems.push(`rss grew ${((first.rss - warm.rss) / MiB).toFixed(1)} MiB in round 1 (bound ${(firstBound / MiB).toFixed(1)} MiB)`);
  }
  for (const r of later) {
    if (r.rss - first.rss > 32 * MiB) {
      problems.push(`rss grew ${((r.rss - first.rss) / MiB).toFixed(1)} MiB more by round ${r.round} (bound 32 MiB)`);
    }
    if (r.wasmBytes !== first.wasmBytes) {
      problems.push(`wasm memory grew from ${first.wasmBytes} to ${r.wasmBytes} bytes by round ${r.round}`);
    }
  }
  return { rounds: printed, problems };
}
