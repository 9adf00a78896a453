'use strict';
/**
 * node-redis v5's cluster client re-reads the slot map only when a node answers MOVED
 * or ASK. When a master dies and its replica is promoted, nobody answers for the dead
 * master's slots: its node client reconnects to the dead address forever and the
 * commands for those slots wait on it. A RedisLockStore on such a client makes it read
 * the slot map again (from a live master) while one of its nodes is reconnecting, at
 * most every REDISCOVER_MS: once the replica is promoted, the slots move to it, the
 * dead node's client is dropped, and its waiting commands fail instead of hanging
 * (the engine then asks again, now of the promoted master).
 * This uses the cluster's `_slots.rediscover`, not a documented API: on a version
 * without it nothing is done, and failover waits for a MOVED as before.
 */

const REDISCOVER_MS = 500;

const following = new WeakSet();

/** Makes the node-redis cluster `client` follow a promoted replica (see above). Idempotent. */
function followFailovers(client) {
  if (following.has(client) || typeof client.on !== 'function') return;
  const slots = client._slots;
  if (slots == null || typeof slots.rediscover !== 'function') return;
  following.add(client);
  let last = 0;
  client.on('node-reconnecting', (node) => {
    // A rediscovery that outlived the client's close opened node clients of its own:
    // closed again, or they would reconnect (and hold the process) forever.
    if (client.isOpen === false) {
      client.destroy();
      return;
    }
    const now = performance.now();
    if (now - last < REDISCOVER_MS) return;
    last = now;
    const from = (client.masters ?? []).find((m) => m.client?.isReady && !(m.host === node?.host && m.port === node?.port));
    if (from === undefined) return;
    slots.rediscover(from.client).then(
      () => client.isOpen === false && client.destroy(),
      () => {},
    );
  });
}

module.exports = { followFailovers };
