'use strict';
/**
 * `leasehold/redis`: a `LockStore` on Redis, for ioredis (v5) and node-redis (v4/v5)
 * clients, standalone or Redis Cluster. Plain JavaScript, no dependency: it works with
 * the client object it is given, recognised by its shape.
 *
 * What it promises
 * - One round trip per `acquire`, `renew` and `release`: each is one Lua script, run
 *   with EVALSHA; when the server does not know the script (NOSCRIPT: first use, after
 *   SCRIPT FLUSH, after a restart, on another cluster node) the call is repeated once
 *   with EVAL, which also caches the script on that server.
 * - The fencing token is issued in the same script as the lease, and only ever increases
 *   per key: across release, across expiry, and across a Redis restart that lost all
 *   data (see ACQUIRE below), as long as the server's wall clock does not step back.
 * - `renew` answering `false` and `release` answering `false` are definitive: the live
 *   lease is not this owner's. Every Redis or client error (connection refused, timeout,
 *   READONLY, WRONGTYPE, ...) rejects unchanged; nothing is turned into `false` or
 *   `undefined`.
 * - `isLocked` and `ttl` are advisory: the answer may be stale when it arrives.
 *
 * Keys. A lock key `k` uses these Redis names, all in one hash slot:
 *   lease  `${prefix}:{${enc(k)}}`           value: the owner, expiry: the lease
 *   token  `${prefix}:{${enc(k)}}:token`     the last fencing token issued for `k`
 *   channel `${prefix}:{${enc(k)}}:released` published when the lease is released
 * Redis Cluster hashes only the text between the first `{` and the next `}`. The prefix
 * may not contain braces, and `enc` percent-encodes `%`, `{` and `}` (as `%25`, `%7B`,
 * `%7D`), so the user's text can never close the tag early nor open it elsewhere, and
 * distinct keys never share a name ('a}', 'a', '{a}' become `{a%7D}`, `{a}`, `{%7Ba%7D}`).
 * Lone UTF-16 surrogates, which every client would send as the same U+FFFD bytes, are
 * encoded as `%uD800`-style escapes, so `enc` is injective on all JS strings. Everything
 * else (spaces, newlines, `*`, emoji, any Unicode) is kept as is: Redis names are binary
 * safe, and the names stay readable in `redis-cli`.
 */

const { createHash } = require('node:crypto');
const { ReleaseListeners } = require('./release-listeners.cjs');

// ---------------------------------------------------------------------------------
// Scripts
// ---------------------------------------------------------------------------------

/** @param {string} source */
function script(source) {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/*
 * ACQUIRE. KEYS: lease, token. ARGV: owner, ttl ms, token retention ms.
 * Free means "the lease key does not exist": Redis expiry decides liveness.
 * token = max(stored token + 1, server time in microseconds). The stored token keeps the
 * sequence increasing however fast a key is re-acquired; TIME keeps it increasing when
 * the stored token is gone: after a restart that lost the data, or after the token key
 * lapsed. TIME in microseconds is below 2^53 until the year 2255, so it is exact both
 * as a Lua number and as a JS number.
 * The token key expires `retention` ms after the last acquire (max(10 x ttl, 60 s)),
 * so the keyspace stays bounded by the keys locked recently, not by every key ever
 * locked. Once it lapses, TIME has moved past every token issued for the key (a token
 * runs ahead of TIME only by the few microseconds of same-microsecond acquires, or by a
 * backward step of the server clock shorter than the retention).
 * The token is written before the lease: if a write fails, a token is skipped, but
 * a lease never exists without its token having been stored.
 * `redis.replicate_commands()` lets Redis 3.2-4.x write after TIME; a no-op from 5 on.
 */
const ACQUIRE = script(`if redis.replicate_commands then redis.replicate_commands() end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local stored = redis.call('GET', KEYS[2])
if stored then
  stored = tonumber(stored)
  if stored and stored >= token then
    token = stored + 1
  end
end
redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return token
`);

/* RENEW. KEYS: lease. ARGV: owner, ttl ms. 1 when the live lease is the owner's. */
const RENEW = script(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`);

/* RELEASE. KEYS: lease. ARGV: owner, channel. Deletes only the owner's live lease and
 * announces it on the key's channel in the same round trip. */
const RELEASE = script(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
`);

const MIN_TOKEN_RETENTION_MS = 60_000;

// ---------------------------------------------------------------------------------
// Client adapters: the only code that knows which client it talks to.
// ---------------------------------------------------------------------------------

function noop() {}

function isNoScript(err) {
  return err != null && typeof err.message === 'string' && /\bNOSCRIPT\b/.test(err.message);
}

/** ioredis `Redis` and `Cluster`: `evalsha(sha, numkeys, ...keys, ...args)`. */
function ioredisAdapter(client) {
  return {
    kind: 'ioredis',
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
    pttl: (key) => client.pttl(key),
    canSubscribe: typeof client.duplicate === 'function',
    openSubscriber(onMessage, onReady) {
      const dup = client.duplicate();
      if (typeof dup.on === 'function') {
        dup.on('error', noop);
        dup.on('message', (channel) => onMessage(String(channel)));
        dup.on('ready', onReady);
      }
      return {
        subscribe: (channels) => dup.subscribe(...channels),
        unsubscribe: (channels) => dup.unsubscribe(...channels),
        // 'end': ioredis gave up reconnecting.
        isDead: () => dup.status === 'end',
        async close() {
          dup.disconnect();
        },
      };
    },
  };
}

/** node-redis v4/v5 client and cluster: `evalSha(sha, { keys, arguments })`. */
function nodeRedisAdapter(client) {
  return {
    kind: 'node-redis',
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
    eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
    pttl: (key) => (typeof client.pTTL === 'function' ? client.pTTL(key) : client.PTTL(key)),
    canSubscribe: typeof client.duplicate === 'function',
    openSubscriber(onMessage, onReady) {
      const dup = client.duplicate();
      if (typeof dup.on === 'function') {
        dup.on('error', noop);
        dup.on('ready', onReady);
      }
      const listener = (_message, channel) => onMessage(String(channel));
      let failed = false;
      const connected = Promise.resolve().then(() => dup.connect());
      connected.catch(() => {
        failed = true;
      });
      return {
        async subscribe(channels) {
          await connected;
          await dup.subscribe(channels, listener);
        },
        async unsubscribe(channels) {
          await connected;
          await dup.unsubscribe(channels, listener);
        },
        // connect() failed and the client is not reconnecting on its own.
        isDead: () => failed && dup.isOpen === false,
        async close() {
          // Forceful: a subscriber has nothing to flush, and a graceful close would
          // wait for a server that may be gone. v5: destroy(); v4: disconnect().
          try {
            if (typeof dup.destroy === 'function') dup.destroy();
            else if (typeof dup.disconnect === 'function') await dup.disconnect();
            else if (typeof dup.quit === 'function') await dup.quit();
          } catch {
            // already closed, or never connected
          }
          await connected.catch(noop);
        },
      };
    },
  };
}

function adapterFor(client) {
  if (client == null || (typeof client !== 'object' && typeof client !== 'function')) return undefined;
  // node-redis spells it evalSha, ioredis evalsha; neither has the other's.
  if (typeof client.evalSha === 'function' && typeof client.eval === 'function') return nodeRedisAdapter(client);
  if (typeof client.evalsha === 'function' && typeof client.eval === 'function') return ioredisAdapter(client);
  return undefined;
}

// ---------------------------------------------------------------------------------
// Names and argument checks
// ---------------------------------------------------------------------------------

const ESCAPED = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function escapeChar(ch) {
  if (ch === '%') return '%25';
  if (ch === '{') return '%7B';
  if (ch === '}') return '%7D';
  return `%u${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The hash-tag body for a lock key: injective, and free of `{` and `}`. */
function encodeKey(key) {
  return key.replace(ESCAPED, escapeChar);
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value === null) return 'null';
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return String(value);
}

function checkString(name, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
}

function checkTtl(value) {
  if (typeof value !== 'number') {
    throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`ttlMs must be a positive integer number of milliseconds, got ${describe(value)}`);
  }
}

function tokenRetentionMs(ttlMs) {
  const tenTimes = ttlMs * 10;
  return Math.max(MIN_TOKEN_RETENTION_MS, Number.isSafeInteger(tenTimes) ? tenTimes : ttlMs);
}

function toToken(reply) {
  const n = typeof reply === 'number' ? reply : Number(reply);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new Error(`RedisLockStore: unexpected reply from the acquire script: ${describe(reply)}`);
  }
  return n;
}

function toFlag(reply, method) {
  const n = Number(reply);
  if (n === 1) return true;
  if (n === 0) return false;
  throw new Error(`RedisLockStore: unexpected reply from the ${method} script: ${describe(reply)}`);
}

// ---------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------

class RedisLockStore {
  /** @type {ReturnType<typeof adapterFor>} */ #redis;
  #prefix;
  // Release announcements: listeners per channel; one subscriber connection per
  // store, opened on the first subscribe.
  #listeners = new ReleaseListeners(() => this.#sync());
  #subscriber = null;
  #subscribed = new Set();
  #syncing = false;
  #dirty = false;
  #closed = false;

  /**
   * @param {{ client: object, prefix?: string }} options
   */
  constructor(options) {
    if (options == null || typeof options !== 'object') {
      throw new TypeError(`options must be an object with a client, got ${describe(options)}`);
    }
    const { client, prefix = 'lock' } = options;
    const redis = adapterFor(client);
    if (redis === undefined) {
      throw new TypeError(
        `client must be an ioredis client (evalsha, eval) or a node-redis client (evalSha, eval), got ${describe(client)}`,
      );
    }
    checkString('prefix', prefix);
    if (/[{}]/.test(prefix)) {
      throw new TypeError(`prefix must not contain '{' or '}' (they would break the Redis Cluster hash tag), got ${describe(prefix)}`);
    }
    this.#redis = redis;
    this.#prefix = prefix;
  }

  /** The key prefix in use. */
  get prefix() {
    return this.#prefix;
  }

  #leaseKey(key) {
    return `${this.#prefix}:{${encodeKey(key)}}`;
  }

  #channel(key) {
    return `${this.#leaseKey(key)}:released`;
  }

  async #run(s, keys, args) {
    try {
      return await this.#redis.evalsha(s.sha, keys, args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return await this.#redis.eval(s.source, keys, args);
    }
  }

  /**
   * Takes the lease on `key` for `ttlMs` if no live lease exists. Resolves to the new
   * fencing token, or `undefined` when the key is held (by anyone, this owner included:
   * locks are not reentrant). Rejects with the client's error when Redis fails.
   */
  async acquire(key, owner, ttlMs) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    const lease = this.#leaseKey(key);
    const reply = await this.#run(ACQUIRE, [lease, `${lease}:token`], [owner, String(ttlMs), String(tokenRetentionMs(ttlMs))]);
    if (reply == null) return undefined;
    return { fencingToken: toToken(reply) };
  }

  /** Resets the lease to `ttlMs` from now if it is `owner`'s; `false` when it is not. */
  async renew(key, owner, ttlMs) {
    checkString('key', key);
    checkString('owner', owner);
    checkTtl(ttlMs);
    return toFlag(await this.#run(RENEW, [this.#leaseKey(key)], [owner, String(ttlMs)]), 'renew');
  }

  /**
   * Deletes the lease if it is `owner`'s live lease, and announces the release to
   * `subscribe` listeners. `false` when the lease had lapsed or belongs to someone else
   * (it is then left alone).
   */
  async release(key, owner) {
    checkString('key', key);
    checkString('owner', owner);
    return toFlag(await this.#run(RELEASE, [this.#leaseKey(key)], [owner, this.#channel(key)]), 'release');
  }

  /** Whether a live lease exists on `key` (advisory). */
  async isLocked(key) {
    checkString('key', key);
    return Number(await this.#redis.pttl(this.#leaseKey(key))) !== -2;
  }

  /** Milliseconds left on the live lease on `key`, `undefined` when free (advisory). */
  async ttl(key) {
    checkString('key', key);
    const ms = Number(await this.#redis.pttl(this.#leaseKey(key)));
    if (ms === -2) return undefined;
    if (ms === -1) return Infinity; // a lease without expiry: not written by this store
    return ms;
  }

  /**
   * Calls `onReleased` when a lease on `key` is released through any RedisLockStore
   * with the same prefix on the same Redis. Returns a function that removes the
   * listener (idempotent).
   *
   * Best effort: the subscription becomes active a round trip after this returns, and
   * a message can be lost (reconnects, a subscriber connection that cannot be opened);
   * callers keep polling with a backoff and treat the call as a hint to retry early.
   * Expiry is not announced. One subscriber connection (`client.duplicate()`) is
   * opened per store on first use and closed by `close()`; channels are reference
   * counted. Never throws for Redis reasons and never lets a subscriber error crash
   * the process; a listener that throws is ignored. Throws TypeError for bad
   * arguments. After `close()` it returns a no-op.
   */
  subscribe(key, onReleased) {
    checkString('key', key);
    if (typeof onReleased !== 'function') {
      throw new TypeError(`onReleased must be a function, got ${describe(onReleased)}`);
    }
    if (this.#closed || !this.#redis.canSubscribe) return noop;
    return this.#listeners.add(this.#channel(key), onReleased);
  }

  /**
   * Closes the subscriber connection this store opened, if any, and drops every
   * listener. The client passed in is left open: it belongs to the caller. The store
   * still acquires, renews and releases afterwards; `subscribe` becomes a no-op.
   */
  async close() {
    this.#closed = true;
    this.#listeners.clear();
    this.#subscribed.clear();
    const subscriber = this.#subscriber;
    this.#subscriber = null;
    if (subscriber !== null) await subscriber.close();
  }

  /** Brings the server-side subscriptions in line with #listeners, one pass at a time. */
  #sync() {
    this.#dirty = true;
    if (this.#syncing) return;
    this.#syncing = true;
    this.#syncLoop().then(
      () => {
        this.#syncing = false;
      },
      () => {
        this.#syncing = false;
      },
    );
  }

  async #syncLoop() {
    while (this.#dirty && !this.#closed) {
      this.#dirty = false;
      if (this.#subscriber === null) {
        if (this.#listeners.size === 0) return;
        try {
          this.#subscriber = this.#redis.openSubscriber(
            (channel) => this.#listeners.notify(channel),
            // (Re)connected: retry whatever failed to subscribe. Resubscribing what was
            // subscribed before a reconnect is the client's own job.
            () => this.#sync(),
          );
        } catch {
          return; // no subscriber: waiters poll
        }
      }
      const subscriber = this.#subscriber;
      const wanted = this.#listeners.channels().filter((c) => !this.#subscribed.has(c));
      if (wanted.length > 0) {
        try {
          await subscriber.subscribe(wanted);
          if (subscriber === this.#subscriber) for (const c of wanted) this.#subscribed.add(c);
        } catch {
          // Not connected yet, or lost: retried on the subscriber's next 'ready'. A
          // connection that will never come back is dropped, so that the next
          // subscribe opens a fresh one.
          if (subscriber === this.#subscriber && subscriber.isDead()) {
            this.#subscriber = null;
            this.#subscribed.clear();
            subscriber.close().catch(noop);
            return;
          }
        }
      }
      const unwanted = [...this.#subscribed].filter((c) => !this.#listeners.has(c));
      if (unwanted.length > 0) {
        for (const c of unwanted) this.#subscribed.delete(c);
        try {
          await subscriber.unsubscribe(unwanted);
        } catch {
          // a stray subscription only costs messages that find no listener
        }
      }
    }
  }
}

module.exports = { RedisLockStore };
