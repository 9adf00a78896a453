'use strict';
// The command line of `leasehold`: what each command takes, checked, as one object.
// A mistake is a UsageError naming what was wrong; main.cjs prints it with a hint.

class UsageError extends Error {}

const SERVERS = ['redis', 'postgres', 'etcd'];

/** Options each command takes: name -> whether it takes a value. */
const OPTIONS = {
  inspect: { redis: true, postgres: true, etcd: true, cluster: false, prefix: true, table: true, schema: true, keys: true, limit: true, json: false, watch: false, interval: true, help: false },
  release: { redis: true, postgres: true, etcd: true, cluster: false, prefix: true, table: true, schema: true, owner: true, json: false, help: false },
};

function checkUrl(kind, text) {
  if (kind === 'etcd') {
    // host:port is taken as http://host:port, as etcd's own tools take it.
    const endpoints = text
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => (/^[\w.-]+:\d+$/.test(s) ? `http://${s}` : s));
    if (endpoints.length === 0) throw new UsageError(`--etcd expects endpoints like http://127.0.0.1:2379[,http://…], got '${text}'`);
    for (const endpoint of endpoints) {
      let url;
      try {
        url = new URL(endpoint);
      } catch {
        throw new UsageError(`--etcd expects endpoints like http://127.0.0.1:2379, got '${endpoint}'`);
      }
      if (!['http:', 'https:'].includes(url.protocol) || url.hostname === '') {
        throw new UsageError(`--etcd expects http:// or https:// endpoints, got '${endpoint}'`);
      }
    }
    return endpoints;
  }
  const schemes = kind === 'redis' ? ['redis:', 'rediss:'] : ['postgres:', 'postgresql:'];
  const example = kind === 'redis' ? 'redis://127.0.0.1:6379' : 'postgres://user:password@127.0.0.1:5432/db';
  let url;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--${kind} expects a URL like ${example}, got '${text}'`);
  }
  if (!schemes.includes(url.protocol) || url.hostname === '') {
    throw new UsageError(`--${kind} expects a URL like ${example} (${schemes.join(' or ')}), got '${text}'`);
  }
  return text;
}

/** Parses `argv` (without node and the script): `{ command, server, keys, ...options }`. */
function parseArgs(argv) {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    return { command: 'help', topic: rest[0] };
  }
  if (command === '--version' || command === '-v') return { command: 'version' };
  if (!(command in OPTIONS)) throw new UsageError(`unknown command '${command}': use inspect or release`);
  const known = OPTIONS[command];
  const options = {};
  const keys = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '-h') {
      options.help = true;
      continue;
    }
    if (!arg.startsWith('--')) {
      keys.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    if (!(name in known)) throw new UsageError(`${command} has no option --${name}`);
    if (!known[name]) {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      options[name] = true;
      continue;
    }
    const value = eq === -1 ? rest[++i] : arg.slice(eq + 1);
    if (value === undefined || (eq === -1 && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
    options[name] = value;
  }
  if (options.help) return { command: 'help', topic: command };
  const given = SERVERS.filter((s) => options[s] !== undefined);
  if (given.length !== 1) {
    throw new UsageError(given.length === 0 ? 'name the server: --redis URL, --postgres URL or --etcd ENDPOINTS' : `name one server, not ${given.map((s) => `--${s}`).join(' and ')}`);
  }
  const kind = given[0];
  const server = { kind, target: checkUrl(kind, options[kind]), cluster: options.cluster === true };
  if (server.cluster && kind !== 'redis') throw new UsageError('--cluster goes with --redis');
  if ((options.table !== undefined || options.schema !== undefined) && kind !== 'postgres') throw new UsageError('--table and --schema go with --postgres');
  if (options.prefix !== undefined && kind === 'postgres') throw new UsageError('--prefix goes with --redis or --etcd (PostgreSQL: --table)');
  const parsed = { command, server, keys, json: options.json === true, prefix: options.prefix, table: options.table, schema: options.schema };
  if (command === 'inspect') {
    parsed.watch = options.watch === true;
    parsed.keyStart = options.keys ?? '';
    parsed.limit = positive('--limit', options.limit, 100);
    parsed.interval = positive('--interval', options.interval, 1000);
    if (parsed.watch && parsed.interval < 100) throw new UsageError('--interval must be at least 100 (ms)');
  } else {
    if (keys.length !== 1) throw new UsageError(`release takes one KEY, got ${keys.length}`);
    if (options.owner === undefined || options.owner === '') throw new UsageError('release needs --owner OWNER: the owner the lease is held by (see leasehold inspect)');
    parsed.owner = options.owner;
  }
  return parsed;
}

function positive(name, text, fallback) {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${name} must be a positive whole number, got '${text}'`);
  return n;
}

module.exports = { parseArgs, UsageError };
