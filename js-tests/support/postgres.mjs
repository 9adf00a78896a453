// A real, throwaway PostgreSQL for tests: `initdb` into a fresh directory under
// os.tmpdir(), `postgres` on a free 127.0.0.1 port (fsync off: nothing here needs to
// survive a crash), one database, stopped and deleted by `stop()` and, whatever
// happened, on process exit. Nothing is mocked. Missing binaries are an error, never a
// skip: `npm run setup` (scripts/setup.sh) installs Debian's `postgresql`.
//
// PostgreSQL refuses to run as root. As root (CI containers), the server and initdb run
// as the `postgres` system user (created by the Debian package), through `runuser -u
// postgres --`, with the directory handed over to that user; as anyone else they run
// as the current user.

import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { pollUntil } from './async.mjs';
import { freePort } from './net.mjs';

export { freePort };

const HOST = '127.0.0.1';
const SUPERUSER = 'postgres';

// A process that dies without running its 'exit' handlers (SIGKILL, a crash) would leave
// its server running: a detached watchdog shell per server stops it (immediate
// shutdown) and deletes its directory once this process is gone.
const WATCHDOG = `parent=$1 pidfile=$2 dir=$3
while kill -0 "$parent" 2>/dev/null; do sleep 0.5; done
pid=$(head -n 1 "$pidfile" 2>/dev/null)
if [ -n "$pid" ]; then kill -QUIT "$pid" 2>/dev/null; sleep 2; fi
rm -rf "$dir"`;

function startWatchdog(dir, data) {
  const child = spawn('sh', ['-c', WATCHDOG, 'leasehold-pg-watchdog', String(process.pid), path.join(data, 'postmaster.pid'), dir], {
    detached: true,
    stdio: 'ignore',
  });
  child.unref();
  return child;
}

/** Every server still running: killed on process exit whatever happened. */
const live = new Set();
process.on('exit', () => {
  for (const server of live) server.killNow();
});

/** The directory of `initdb` and `postgres`: the newest /usr/lib/postgresql/<v>/bin, else PATH. */
export function postgresBinDir() {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(path.join(root, v, 'bin', 'postgres')) && existsSync(path.join(root, v, 'bin', 'initdb')))
      .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
    if (versions.length > 0) return path.join(root, versions[0], 'bin');
  }
  const which = spawnSync('sh', ['-c', 'command -v postgres'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim() !== '') return path.dirname(which.stdout.trim());
  throw new Error(
    'PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres, no postgres on PATH). ' +
      'The Postgres tests need a real server: run `npm run setup` (or `apt-get install -y postgresql`).',
  );
}

/** uid and gid of the `postgres` system user, when running as root. */
function systemUser() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${SUPERUSER}:`));
  if (line === undefined) {
    throw new Error('running as root, but there is no `postgres` system user to run PostgreSQL as (apt-get install -y postgresql creates it)');
  }
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** [command, args] running `bin` as the postgres user when we are root. */
function asServerUser(user, bin, args) {
  return user === undefined ? [bin, args] : ['runuser', ['-u', SUPERUSER, '--', bin, ...args]];
}

function tail(text, n = 3000) {
  return text.length > n ? `...${text.slice(-n)}` : text;
}

function run(command, args, options) {
  const r = spawnSync(command, args, { encoding: 'utf8', timeout: 60_000, ...options });
  if (r.error || r.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${tail(`${r.stdout}${r.stderr}`)}`);
  }
  return r;
}

/** Polls `check` until it returns a truthy value; throws after `timeoutMs`. */
export function waitFor(what, check, { timeoutMs = 10_000, intervalMs = 25 } = {}) {
  return pollUntil(what, check, { timeoutMs, intervalMs });
}

async function canConnect(port, database) {
  const client = new pg.Client({ host: HOST, port, user: SUPERUSER, database, connectionTimeoutMillis: 1000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Initialises and starts a PostgreSQL cluster, and creates `database`.
 * Returns { host, port, user, database, url, dir, connectionOptions, stop() }.
 * `settings` adds `-c name=value` server settings.
 */
export async function startPostgres({ database = 'leasehold', settings = {} } = {}) {
  const bin = postgresBinDir();
  const user = systemUser();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'leasehold-pg-'));
  const data = path.join(dir, 'data');
  if (user !== undefined) chownSync(dir, user.uid, user.gid);
  const env = { ...process.env, HOME: dir, LC_ALL: 'C', LANG: 'C' };

  let child;
  let output = '';
  let exited;
  const watchdog = startWatchdog(dir, data);
  const stopWatchdog = () => {
    try {
      watchdog.kill('SIGKILL');
    } catch {
      // already gone
    }
  };
  const server = {
    killNow() {
      stopWatchdog();
      // Immediate shutdown, synchronous: for process exit only.
      try {
        if (child && child.exitCode === null && child.signalCode === null) postmasterKill('SIGQUIT');
      } catch {
        // already gone
      }
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // still in use: os.tmpdir() is cleaned eventually
      }
    },
  };
  /** The postmaster's own pid (runuser's child when we are root), from its pid file. */
  function postmasterPid() {
    try {
      const pid = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }
  function postmasterKill(signal) {
    const pid = postmasterPid();
    if (pid !== undefined) {
      try {
        process.kill(pid, signal);
        return;
      } catch {
        // not running any more
      }
    }
    child?.kill(signal);
  }

  try {
    const [initCmd, initArgs] = asServerUser(user, path.join(bin, 'initdb'), [
      '-D', data,
      '-U', SUPERUSER,
      '-A', 'trust',
      '-E', 'UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
    run(initCmd, initArgs, { cwd: dir, env });

    const port = await freePort();
    const serverArgs = [
      '-D', data,
      '-h', HOST,
      '-p', String(port),
      '-k', dir,
      '-c', 'fsync=off',
      '-c', 'synchronous_commit=off',
      '-c', 'full_page_writes=off',
      '-c', 'shared_buffers=32MB',
      '-c', 'max_connections=100',
      '-c', 'log_min_messages=warning',
      ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    ];
    const [cmd, args] = asServerUser(user, path.join(bin, 'postgres'), serverArgs);
    child = spawn(cmd, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(server);
    const collect = (chunk) => {
      output = tail(output + chunk.toString('utf8'), 8000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', (err) => {
      output += `\nspawn error: ${err.message}`;
    });
    exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    let gone = false;
    exited.then(() => {
      gone = true;
      live.delete(server);
    });

    await waitFor(`postgres on port ${port} to accept connections`, async () => {
      if (gone) throw new Error(`postgres exited early:\n${tail(output)}`);
      return canConnect(port, 'postgres');
    });
    const admin = new pg.Client({ host: HOST, port, user: SUPERUSER, database: 'postgres' });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${database}`);
    } finally {
      await admin.end();
    }

    let stopped = false;
    const connectionOptions = { host: HOST, port, user: SUPERUSER, database };
    return {
      host: HOST,
      port,
      user: SUPERUSER,
      database,
      dir,
      url: `postgres://${SUPERUSER}@${HOST}:${port}/${database}`,
      connectionOptions,
      get output() {
        return output;
      },
      /** Fast shutdown (SIGINT: disconnects clients, no checkpoint wait), then deletes the directory. */
      async stop() {
        if (stopped) return;
        stopped = true;
        try {
          if (child.exitCode === null && child.signalCode === null) {
            postmasterKill('SIGINT');
            const done = await Promise.race([exited, sleep(5000, undefined, { ref: false })]);
            if (done === undefined) {
              postmasterKill('SIGQUIT');
              await Promise.race([exited, sleep(2000, undefined, { ref: false })]);
              child.kill('SIGKILL');
            }
          }
        } finally {
          live.delete(server);
          stopWatchdog();
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (err) {
    server.killNow();
    live.delete(server);
    throw new Error(`${err.message}${output ? `\npostgres output:\n${tail(output)}` : ''}`, { cause: err });
  }
}
