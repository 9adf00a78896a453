'use strict';
/**
 * `inspect` and `list` of `RedisLockStore` (./index.cjs; names.cjs names the
 * Redis keys of a lock): reads only, never a write, never KEYS.
 *
 * - `inspect(key)` is one read-only script on the key's slot (INSPECT below): the
 *   lease's owner and PTTL, the key's last fencing token (the holder's: a lease and its
 *   token are written together), and the queued owners whose entries are still valid,
 *   in queue order, with the time each was first queued (the server's clock). On a key
 *   held with permits (permit-scripts.cjs): each live holder with its own token, ttl and
 *   weight (and mode), oldest grant first, and the key's `limit`.
 * - `list({ prefix, limit })` walks the keyspace with SCAN MATCH (COUNT 1000 per call)
 *   on a standalone server, or on each master of a Cluster in turn, and yields the
 *   lock keys whose lease exists. It holds one SCAN reply at a time: memory stays
 *   bounded however many keys the server has, and each call does a bounded amount of
 *   work on the server. As SCAN promises: a key held for the whole walk is yielded; a
 *   key taken or released during it may or may not be; a key may come twice while
 *   Redis resizes its table.
 */

const { script } = require('./lua.cjs');
const { permitsShown } = require('../shared/permits.cjs');

/** Queued owners an inspection reads at most (a store queues at most 4096 per key). */
const MAX_WAITERS = 10_000;
/** Keys a SCAN call looks at: the work of one call on the server. */
const SCAN_COUNT = 1000;

/*
 * INSPECT. KEYS: lease, token, queue, waiters. ARGV: most waiters to read. Reads only.
 * Returns { owner or '', PTTL, token or '', the key's limit or '', n, then owner, ms
 * left, weight, token for each of the n live holders of a key held with permits (its
 * lease a hash: permit-scripts.cjs), then owner, queued since (ms) per valid waiter }.
 * A waiter's entry starts "<valid until> <ttl> <queued since> "; one no longer valid
 * (its owner stopped asking) is left out, as a release would skip it.
 */
const INSPECT = script(`local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out
if redis.call('TYPE', KEYS[1]).ok == 'hash' then
  out = { '', -2, '', redis.call('HGET', KEYS[1], '') or '', 0 }
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local expiry, weight, token = string.match(all[i + 1], '^(%d+) (%d+) (%d+)$')
    if all[i] ~= '' and expiry and tonumber(expiry) > now_ms then
      out[5] = out[5] + 1
      out[#out + 1] = all[i]
      out[#out + 1] = tonumber(expiry) - now_ms
      out[#out + 1] = weight
      out[#out + 1] = token
    end
  end
else
  out = { redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', '', 0 }
end
for _, waiter in ipairs(redis.call('LRANGE', KEYS[3], 0, tonumber(ARGV[1]) - 1)) do
  local entry = redis.call('HGET', KEYS[4], waiter)
  if entry then
    local valid, since = string.match(entry, '^(%d+) %d+ (%d+) ')
    if valid and tonumber(valid) >= now_ms then
      out[#out + 1] = waiter
      out[#out + 1] = since
    end
  end
end
return out
`);

const ESCAPE = /%(25|7B|7D|u[0-9A-F]{4})/g;

/** The lock key whose hash-tag body is `body` (the inverse of `encodeKey` in ./names.cjs). */
function decodeKey(body) {
  return body.replace(ESCAPE, (_, code) => {
    if (code === '25') return '%';
    if (code === '7B') return '{';
    if (code === '7D') return '}';
    return String.fromCharCode(parseInt(code.slice(1), 16));
  });
}

/** `text` with SCAN MATCH's special characters escaped: it matches itself only. */
function globEscape(text) {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * Reads INSPECT's reply into `{ key, holders, waiters }` (and `limit` on a key held with
 * permits, its holders oldest grant first), or undefined for nothing there.
 */
function readInspection(key, reply) {
  const [owner, pttl, token, limitText, count] = reply;
  const holders = [];
  const ms = Number(pttl);
  if (String(owner) !== '' && ms !== -2) {
    holders.push({ owner: String(owner), fencingToken: Number(token), ttl: ms === -1 ? Infinity : ms });
  }
  const limit = String(limitText) === '' ? undefined : Number(limitText);
  let i = 5;
  for (const end = i + 4 * Number(count); i < end; i += 4) {
    const weight = Number(reply[i + 2]);
    holders.push({ owner: String(reply[i]), fencingToken: Number(reply[i + 3]), ttl: Number(reply[i + 1]), ...permitsShown(limit, weight) });
  }
  holders.sort((a, b) => a.fencingToken - b.fencingToken);
  const waiters = [];
  for (; i + 1 < reply.length; i += 2) {
    waiters.push({ owner: String(reply[i]), since: Number(reply[i + 1]) });
  }
  if (holders.length === 0 && waiters.length === 0) return undefined;
  return limit === undefined ? { key, holders, waiters } : { key, holders, waiters, limit };
}

/**
 * The nodes to SCAN, each as `scan(cursor, pattern) -> [nextCursor, names]`: the client
 * itself, or every master of a Cluster (ioredis `nodes('master')`; node-redis `masters`
 * and `nodeClient`).
 */
async function scanners(client) {
  if (typeof client.evalSha === 'function') {
    const send = (c) => (cursor, pattern) => c.sendCommand(['SCAN', cursor, 'MATCH', pattern, 'COUNT', String(SCAN_COUNT)]);
    if (typeof client.nodeClient !== 'function' && typeof client.getMasters !== 'function') return [send(client)];
    const masters = client.masters ?? client.getMasters();
    const clients = [];
    for (const master of masters) {
      clients.push(typeof client.nodeClient === 'function' ? await client.nodeClient(master) : master.client);
    }
    return clients.map(send);
  }
  const nodes = client.isCluster === true ? client.nodes('master') : [client];
  return nodes.map((node) => (cursor, pattern) => node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT));
}

/**
 * `inspect` and `list` for a store on `client` whose lock keys are named
 * `${prefix}:{enc(key)}` after the client's `keyPrefix`; `run(script, keys, args)` runs a
 * script the store's way (EVALSHA, EVAL on NOSCRIPT), and `keysOf(key)` gives a key's
 * Redis names in script order.
 */
function redisInspector({ client, prefix, keyPrefix, run, keysOf, encodeKey }) {
  return {
    async inspect(key) {
      const reply = await run(INSPECT, keysOf(key), [String(MAX_WAITERS)]);
      return readInspection(key, reply);
    },
    async *list({ prefix: keyStart, limit }) {
      if (limit <= 0) return;
      const head = `${keyPrefix}${prefix}:{`;
      const pattern = `${globEscape(head)}${globEscape(encodeKey(keyStart))}*}`;
      let left = limit;
      for (const scan of await scanners(client)) {
        let cursor = '0';
        do {
          const [next, names] = await scan(cursor, pattern);
          cursor = String(next);
          for (const raw of names) {
            const name = String(raw);
            const body = name.slice(head.length, -1);
            // A lease's name is the head, a body without braces, and '}'.
            if (!name.startsWith(head) || !name.endsWith('}') || /[{}]/.test(body)) continue;
            yield decodeKey(body);
            if (--left === 0) return;
          }
        } while (cursor !== '0');
      }
    },
  };
}

module.exports = { redisInspector, decodeKey, INSPECT };
