// A real PgBouncer in front of a test PostgreSQL (support/postgres.mjs), on a free
// 127.0.0.1 port, in `transaction` pooling mode unless told otherwise: a server
// connection is a client's only for one transaction, so nothing of a session (LISTEN,
// prepared statements by name, advisory locks, SET) survives from one to the next.
// Stopped by `stop()` and, whatever happened, on process exit. PgBouncer refuses to run
// as root: as root it runs as the `postgres` system user, like the server. Missing
// `pgbouncer` is an error, never a skip: `npm run setup` installs it.

import { spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from './net.mjs';
import { waitFor } from './postgres.mjs';

const HOST = '127.0.0.1';
const BIN = '/usr/sbin/pgbouncer';

function pgbouncerBinary() {
  for (const bin of [BIN, 'pgbouncer']) {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    if (!r.error && r.status === 0) return bin;
  }
  throw new Error('pgbouncer is not installed: run `npm run setup` (or `apt-get install -y pgbouncer`).');
}

const live = new Set();
process.on('exit', () => {
  for (const kill of live) kill();
});

/**
 * Starts PgBouncer for `server` (from startPostgres). Returns { host, port, database,
 * user, connectionOptions, stop() }: `connectionOptions` reach the database through
 * the pooler.
 */
export async function startPgBouncer(server, { poolMode = 'transaction', poolSize = 4 } = {}) {
  const bin = pgbouncerBinary();
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'leasehold-pgbouncer-'));
  const port = await freePort();
  const pidfile = path.join(dir, 'pgbouncer.pid');
  writeFileSync(path.join(dir, 'users.txt'), `"${server.user}" ""\n`);
  writeFileSync(path.join(dir, 'pgbouncer.ini'), [
    '[databases]',
    `${server.database} = host=${server.host} port=${server.port} dbname=${server.database}`,
    '[pgbouncer]',
    `listen_addr = ${HOST}`,
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'users.txt')}`,
    `pool_mode = ${poolMode}`,
    `default_pool_size = ${poolSize}`,
    'max_client_conn = 200',
    `pidfile = ${pidfile}`,
    'ignore_startup_parameters = extra_float_digits,options',
    '',
  ].join('\n'));
  if (root) {
    const [, , uid, gid] = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:')).split(':');
    for (const f of ['', 'users.txt', 'pgbouncer.ini']) chownSync(path.join(dir, f), Number(uid), Number(gid));
  }
  const args = [path.join(dir, 'pgbouncer.ini')];
  const child = root ? spawn('runuser', ['-u', 'postgres', '--', bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (c) => {
    output = (output + c.toString('utf8')).slice(-6000);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const pid = () => {
    try {
      return Number(readFileSync(pidfile, 'utf8').trim()) || undefined;
    } catch {
      return undefined;
    }
  };
  const signal = (sig) => {
    const p = pid();
    try {
      if (p !== undefined) process.kill(p, sig);
      else child.kill(sig);
    } catch {
      // gone
    }
  };
  const killNow = () => {
    signal('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  live.add(killNow);
  const connectionOptions = { host: HOST, port, user: server.user, database: server.database };
  try {
    await waitFor(`pgbouncer on port ${port}`, async () => {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited early:\n${output}`);
      const c = new pg.Client({ ...connectionOptions, connectionTimeoutMillis: 1000 });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.query('SELECT 1');
        return true;
      } finally {
        await c.end().catch(() => {});
      }
    });
  } catch (err) {
    live.delete(killNow);
    killNow();
    throw new Error(`${err.message}\npgbouncer output:\n${output}`, { cause: err });
  }
  let stopped = false;
  return {
    host: HOST,
    port,
    user: server.user,
    database: server.database,
    connectionOptions,
    async stop() {
      if (stopped) return;
      stopped = true;
      live.delete(killNow);
      signal('SIGTERM'); // immediate shutdown: the test's clients are closed by now
      const done = await Promise.race([exited, sleep(3000, undefined, { ref: false })]);
      if (done === undefined) signal('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
