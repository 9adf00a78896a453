'use strict';
/**
 * The Redis clients `RedisLockStore` works with, ioredis (v5) and node-redis (v4/v5),
 * standalone or cluster, told apart by shape: the only code that knows which client it
 * talks to. `adapterFor(client)` gives the store one interface over either: scripts
 * (EVALSHA, EVAL), PTTL, the key prefix the client adds, whether the caller's client has
 * ended and a watch on its end, and a subscriber connection of the store's own
 * (`client.duplicate()`) that keeps the process alive only when told to.
 */

const { followFailovers } = require('./node-redis-failover.cjs');

function noop() {}

function isNoScript(err) {
  return err != null && typeof err.message === 'string' && /\bNOSCRIPT\b/.test(err.message);
}

/**
 * The stores watching each caller's client for its end (closed by its owner, or given
 * up reconnecting): one listener per client and event, however many stores share it.
 */
const endWatchers = new WeakMap();

/** Calls `onEnd` when `client` emits one of `events`; returns a function that stops it. */
function watchEnd(client, events, onEnd) {
  if (typeof client.on !== 'function') return noop;
  let watchers = endWatchers.get(client);
  if (watchers === undefined) {
    watchers = new Set();
    endWatchers.set(client, watchers);
    const fire = () => {
      for (const watcher of [...watchers]) watcher();
    };
    for (const event of events) client.on(event, fire);
  }
  const watcher = () => onEnd();
  watchers.add(watcher);
  return () => watchers.delete(watcher);
}

/**
 * ioredis `Redis` and `Cluster`: `evalsha(sha, numkeys, keys, args)`, flattened by the client. Its
 * `keyPrefix` option is prepended to every key the client sends (the KEYS of a script
 * and PTTL's key), not to channel names; a Cluster copies `redisOptions.keyPrefix` to
 * its own `options.keyPrefix`.
 */
function ioredisAdapter(client) {
  return {
    kind: 'ioredis',
    isCluster: client.isCluster === true,
    keyPrefix: String(client.options?.keyPrefix ?? ''),
    // The keys and arguments as two arrays: ioredis flattens a command's arguments
    // one level (Command's `args.flat()`), so nothing is spread per call.
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, keys, args),
    eval: (source, keys, args) => client.eval(source, keys.length, keys, args),
    pttl: (key) => client.pttl(key),
    // WAIT on the connection that ran the script, which is what WAIT counts, then GET
    // `read` (in the key's slot) on the same one: [acknowledged, value] (replicas.cjs).
    // In a pipeline, which a Cluster sends to the slot's master.
    async waitReplicas(read, replicas, timeoutMs) {
      const replies = await client.pipeline().wait(replicas, timeoutMs).get(read).exec();
      for (const [err] of replies) if (err) throw err;
      return [replies[0][1], replies[1][1]];
    },
    canSubscribe: typeof client.duplicate === 'function',
    // Closed by its owner (quit, disconnect), or given up reconnecting.
    isEnded: () => client.status === 'end',
    onEnd: (fn) => watchEnd(client, ['end'], fn),
    openSubscriber(onMessage, onReady, onEnd) {
      const dup = client.duplicate();
      // Whether the connection may keep the process alive; each new socket (a
      // reconnect) is told again. A Cluster's sockets are its own: it closes with the
      // caller's client instead.
      let keepsAlive = false;
      const applyRef = () => {
        const stream = dup.stream;
        if (stream == null) return;
        if (keepsAlive) stream.ref?.();
        else stream.unref?.();
      };
      if (typeof dup.on === 'function') {
        dup.on('error', noop);
        dup.on('message', (channel, message) => onMessage(String(channel), String(message)));
        dup.on('connect', applyRef);
        dup.on('ready', onReady);
        // ioredis gave up reconnecting (or was closed).
        dup.on('end', onEnd);
      }
      return {
        subscribe: (channels) => dup.subscribe(...channels),
        unsubscribe: (channels) => dup.unsubscribe(...channels),
        // 'end': ioredis gave up reconnecting.
        isDead: () => dup.status === 'end',
        keepAlive(on) {
          keepsAlive = on;
          applyRef();
        },
        async close() {
          dup.disconnect();
        },
      };
    },
  };
}

/** node-redis v4/v5 client and cluster: `evalSha(sha, { keys, arguments })`. */
/** How long closing waits for a node-redis subscriber's connect() under way to finish. */
const CONNECTING_CLOSE_MS = 2_000;

function nodeRedisAdapter(client) {
  if (typeof client.getMasters === 'function') followFailovers(client);
  return {
    kind: 'node-redis',
    isCluster: typeof client.getMasters === 'function',
    keyPrefix: '',
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
    eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
    pttl: (key) => (typeof client.pTTL === 'function' ? client.pTTL(key) : client.PTTL(key)),
    // On the connection that ran the script: a cluster's client for the key's master.
    // Both sent at once: pipelined on that connection.
    waitReplicas: (read, replicas, timeoutMs) => {
      const args = ['WAIT', String(replicas), String(timeoutMs)];
      const acked = typeof client.getMasters === 'function' ? client.sendCommand(read, false, args) : client.sendCommand(args);
      return Promise.all([acked, client.get(read)]);
    },
    canSubscribe: typeof client.duplicate === 'function',
    // Closed by its owner (close, destroy, quit, disconnect).
    isEnded: () => client.isOpen === false,
    // A client emits 'end' as it closes, a cluster 'disconnect'.
    onEnd: (fn) => watchEnd(client, ['end', 'disconnect'], fn),
    openSubscriber(onMessage, onReady, onEnd) {
      const dup = client.duplicate();
      if (typeof dup.getMasters === 'function') followFailovers(dup);
      // A client's socket may be unref'd (before it exists, too); a cluster's sockets
      // are its own: it closes with the caller's client instead.
      const keepAlive = (on) => {
        try {
          if (on) dup.ref?.();
          else dup.unref?.();
        } catch {
          // a client of a version without ref()/unref()
        }
      };
      keepAlive(false);
      if (typeof dup.on === 'function') {
        // A connection lost for good: node-redis reports the error, and the client is
        // no longer open once it decided not to reconnect.
        dup.on('error', () => setTimeout(() => dup.isOpen === false && onEnd(), 0));
        dup.on('ready', onReady);
        dup.on('end', onEnd);
      }
      const listener = (message, channel) => onMessage(String(channel), String(message));
      let failed = false;
      let closed = false;
      const connected = Promise.resolve().then(() => dup.connect());
      connected.catch(() => {
        failed = true;
      });
      // Forceful: a subscriber has nothing to flush, and a graceful close would wait for
      // a server that may be gone. v5: destroy(); v4: disconnect().
      const destroy = async () => {
        try {
          if (typeof dup.destroy === 'function') dup.destroy();
          else if (typeof dup.disconnect === 'function') await dup.disconnect();
          else if (typeof dup.quit === 'function') await dup.quit();
        } catch {
          // already closed, or never connected
        }
      };
      return {
        async subscribe(channels) {
          await connected;
          if (closed) throw new Error('RedisLockStore: the subscriber connection is closed');
          await dup.subscribe(channels, listener);
        },
        async unsubscribe(channels) {
          await connected;
          await dup.unsubscribe(channels, listener);
        },
        // connect() failed and the client is not reconnecting on its own.
        isDead: () => failed && dup.isOpen === false,
        keepAlive,
        async close() {
          closed = true;
          // A cluster destroyed while its connect() runs goes on opening its nodes'
          // connections, which would reconnect forever and hold the process: a connect
          // under way is let finish first (bounded: its server may be gone), then
          // destroyed, and destroyed again once it settled.
          let timer;
          const bound = new Promise((resolve) => {
            timer = setTimeout(resolve, CONNECTING_CLOSE_MS);
          });
          await Promise.race([connected.catch(noop), bound]);
          clearTimeout(timer);
          await destroy();
          await connected.catch(noop);
          await destroy();
        },
      };
    },
  };
}

/**
 * node-redis v5's Sentinel client (`createSentinel`): its commands go to the current
 * primary, and it subscribes on a connection of its own that follows a promoted
 * primary. It has no `duplicate()`: the store's subscriptions share that connection,
 * with a listener of the store's own, removed by `close()`.
 */
function nodeRedisSentinelAdapter(client) {
  const adapter = nodeRedisAdapter(client);
  return {
    ...adapter,
    kind: 'node-redis-sentinel',
    isCluster: false,
    waitReplicas: (read, replicas, timeoutMs) =>
      Promise.all([client.sendCommand(false, ['WAIT', String(replicas), String(timeoutMs)]), client.get(read)]),
    canSubscribe: true,
    openSubscriber(onMessage) {
      const listener = (message, channel) => onMessage(String(channel), String(message));
      const mine = new Set();
      return {
        async subscribe(channels) {
          await client.subscribe(channels, listener);
          for (const c of channels) mine.add(c);
        },
        async unsubscribe(channels) {
          for (const c of channels) mine.delete(c);
          await client.unsubscribe(channels, listener);
        },
        isDead: () => client.isOpen === false,
        // The connection is the caller's: it lives as long as the client does.
        keepAlive: noop,
        async close() {
          const channels = [...mine];
          mine.clear();
          if (channels.length > 0 && client.isOpen !== false) await client.unsubscribe(channels, listener).catch(noop);
        },
      };
    },
  };
}

function isNodeRedisSentinel(client) {
  return typeof client.getSentinelNode === 'function' && typeof client.getMasterNode === 'function';
}

function adapterFor(client) {
  if (client == null || (typeof client !== 'object' && typeof client !== 'function')) return undefined;
  if (typeof client.evalSha === 'function' && typeof client.eval === 'function' && isNodeRedisSentinel(client)) {
    return nodeRedisSentinelAdapter(client);
  }
  // node-redis spells it evalSha, ioredis evalsha; neither has the other's.
  if (typeof client.evalSha === 'function' && typeof client.eval === 'function') return nodeRedisAdapter(client);
  if (typeof client.evalsha === 'function' && typeof client.eval === 'function') return ioredisAdapter(client);
  return undefined;
}

module.exports = { adapterFor, isNoScript, noop };
