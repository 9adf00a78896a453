// Servers a test process started (redis-server, etcd), killed when that process exits,
// whatever happened: a failed or interrupted test must not leave one running.

const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** Kills `child` when this process exits, unless it exited first. */
export function killOnExit(child) {
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}
