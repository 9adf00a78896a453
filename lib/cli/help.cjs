'use strict';
// The text of `leasehold --help` and of each command's --help.

const GENERAL = `leasehold: see who holds which lock, and free a lease by hand

Usage
  leasehold inspect SERVER [--keys START] [--limit N] [--json] [--watch] [KEY...]
  leasehold release SERVER KEY --owner OWNER [--json]
  leasehold COMMAND --help

SERVER (one of)
  --redis URL          redis://[user:password@]host:6379 (rediss:// for TLS); add
                       --cluster for a Redis Cluster (the URL names one node)
  --postgres URL       postgres://user:password@host:5432/db
  --etcd ENDPOINTS     http://host:2379[,http://host2:2379,...] (host:2379 is http)
  --prefix P           the store's key prefix, if not the default
                       (RedisLockStore 'lock', EtcdLockStore 'leasehold')
  --table T, --schema S  the PostgresLockStore table, if not leasehold_locks

Client libraries
  The commands use the client your project installs (peer dependencies of
  leasehold): ioredis for --redis, pg for --postgres, etcd3 for --etcd.
  Missing one? npm install ioredis (or pg, or etcd3) in the project you run from.

Exit status
  0 done; 1 release found no lease of that owner; 2 a mistake on the command
  line (a malformed URL included); 3 the server could not be reached or read.

Examples
  npx leasehold inspect --redis redis://127.0.0.1:6379
  npx leasehold inspect --redis redis://127.0.0.1:6379 --keys billing/ --watch
  npx leasehold inspect --postgres postgres://app@db/app nightly-report --json
  npx leasehold inspect --etcd http://10.0.0.5:2379 --prefix locks
  npx leasehold release --redis redis://127.0.0.1:6379 nightly-report \\
      --owner web-1:4242:3f2a9c...
`;

const INSPECT = `leasehold inspect SERVER [--keys START] [--limit N] [--json] [--watch] [KEY...]

Shows the held keys (or the KEYs named): who holds each (the owner: host and pid
of the process, then its random id), its fencing token, the time left on its
lease, and how many wait (with KEYs named: each waiter in queue order, and for
how long it has waited, where the store records it). Reads only: nothing is
extended, taken or woken.

  --keys START   only keys that start with START
  --limit N      at most N keys (default 100)
  --json         one JSON array of { key, holders, waiters } (with --watch: one
                 line per refresh); a time left of null means no expiry
  --watch        redraw every second, what changed since the last frame in
                 colour: a new holder or token, a renewal, a key newly held
                 (green), a key released (red); Ctrl-C quits
  --interval MS  with --watch: how often to redraw (default 1000)

Waiters: Redis and etcd keep a queue and show it; PostgreSQL keeps none (its
waiters poll), so no waiter shows there.

${GENERAL.slice(GENERAL.indexOf('SERVER (one of)'))}`;

const RELEASE = `leasehold release SERVER KEY --owner OWNER [--json]

Ends the lease on KEY if OWNER holds it (copy the owner from leasehold inspect),
and says what it did. The holder learns the loss as from any other release: its
next renewal finds the lease gone, its signal aborts with LockLostError, and the
next waiter (if any) gets the key. A lease held by another owner is left alone
(exit status 1).

${GENERAL.slice(GENERAL.indexOf('SERVER (one of)'))}`;

function helpText(topic) {
  if (topic === 'inspect') return INSPECT;
  if (topic === 'release') return RELEASE;
  return GENERAL;
}

module.exports = { helpText };
