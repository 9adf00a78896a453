'use strict';
/**
 * Replica acknowledgement for `RedisLockStore` (`minReplicas`, `replicaTimeout`): after
 * a write that a failover must not lose (a grant, a renewal, a raised token floor) the
 * store sends `WAIT minReplicas replicaTimeout` on the connection that wrote it, and
 * counts the write as done only when that many replicas hold it. Redis replicates
 * asynchronously: without this, a lease granted on a primary that dies before its
 * replicas copy it is free again on the promoted replica.
 *
 * What must hold
 * - WAIT counts the replication offset of the calling connection's last write, so it
 *   goes to the node that ran the script, on the same connection: ioredis sends it in a
 *   pipeline keyed by the lease (a Cluster routes it to the key's master), node-redis
 *   through the key's master (cluster) or the client's own connection.
 * - Too few replicas in time is a store failure (an Error; the engine reports a
 *   LockStoreError), never `false`: the write did happen on the primary. The store
 *   undoes an acquire that failed this way, so that no key is left held by nobody.
 * - WAIT blocks its connection until it answers: every command queued behind it on that
 *   client waits too, at most `replicaTimeout`.
 */

const { describe } = require('../../common/describe.cjs');

const DEFAULT_REPLICA_TIMEOUT_MS = 1000;

/** `{ minReplicas, replicaTimeout }` checked; undefined when no acknowledgement is asked. */
function replicaSettings(options) {
  const { minReplicas = 0, replicaTimeout } = options;
  if (typeof minReplicas !== 'number' || !Number.isSafeInteger(minReplicas) || minReplicas < 0) {
    throw new RangeError(`minReplicas must be a non-negative integer (replicas that must hold a write), got ${describe(minReplicas)}`);
  }
  if (replicaTimeout !== undefined && (typeof replicaTimeout !== 'number' || !Number.isSafeInteger(replicaTimeout) || replicaTimeout <= 0)) {
    throw new RangeError(
      `replicaTimeout must be a positive integer number of milliseconds (WAIT 0 would block forever), got ${describe(replicaTimeout)}`,
    );
  }
  if (minReplicas === 0) {
    if (replicaTimeout !== undefined) throw new TypeError('replicaTimeout is only used with minReplicas: give minReplicas (1 or more) too');
    return undefined;
  }
  return { minReplicas, timeoutMs: replicaTimeout ?? DEFAULT_REPLICA_TIMEOUT_MS };
}

/** A write that too few replicas acknowledged in time. */
class ReplicaAcknowledgementError extends Error {
  constructor(what, acked, settings) {
    super(
      `RedisLockStore: ${what} reached ${acked} of the ${settings.minReplicas} replicas asked for (minReplicas) ` +
        `within ${settings.timeoutMs} ms (replicaTimeout)`,
    );
    this.name = 'ReplicaAcknowledgementError';
    this.code = 'REPLICAS_NOT_ACKNOWLEDGED';
    this.acknowledged = acked;
  }
}

/**
 * Waits until `settings.minReplicas` replicas hold the last write made on the connection
 * of `read`'s slot, and reads `read` on that connection after the WAIT: a connection
 * that was replaced meanwhile (the primary died, the client reconnected to the promoted
 * one and sent the WAIT again there, where it counts no write) must still find what was
 * written, so `holds(value)` must be true. Throws a ReplicaAcknowledgementError naming
 * `what` otherwise.
 */
async function awaitReplicas(redis, read, settings, what, holds) {
  const [reply, value] = await redis.waitReplicas(read, settings.minReplicas, settings.timeoutMs);
  const acked = Number(reply);
  if (!(acked >= settings.minReplicas)) throw new ReplicaAcknowledgementError(what, acked, settings);
  if (!holds(value)) {
    throw new ReplicaAcknowledgementError(`${what} (not found on the server after the WAIT: a failover?)`, 0, settings);
  }
}

/** Resolves `promise`, or undefined after `ms` (for clean-ups that must not hang a caller). */
function within(promise, ms) {
  let timer;
  const bound = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref?.();
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** Leases granted and not released that a store remembers the token of, at most. */
const MAX_GRANTED = 4096;

/**
 * A store's acknowledgement rules (`minReplicas`), with the token each live lease of the
 * store was granted with: a release carrying no larger token raised no floor, and waits
 * for nothing.
 */
class ReplicaAcknowledgement {
  #redis;
  #settings;
  #granted = new Map(); // owner -> { token, tokenKey (a permit's: its key's token name) }, oldest first

  constructor(redis, settings) {
    this.#redis = redis;
    this.#settings = settings;
  }

  /**
   * The lease on `lease` was just granted to `owner` with `token`. When too few replicas
   * hold it in time (or WAIT fails) `undo()` releases it again, bounded by the timeout
   * (the primary may be gone: the lease then went with it, or expires), and the error
   * is thrown. A permit (`tokenKey` given: its lease is a hash, which GET cannot read)
   * is found after the WAIT by its key's token, written in the same script.
   */
  async granted(lease, owner, token, key, undo, tokenKey) {
    try {
      if (tokenKey === undefined) await awaitReplicas(this.#redis, lease, this.#settings, `the lease on ${describe(key)}`, (holder) => holder === owner);
      else await awaitReplicas(this.#redis, tokenKey, this.#settings, `the permit on ${describe(key)}`, (stored) => Number(stored) >= token);
    } catch (err) {
      await within(undo().catch(() => {}), this.#settings.timeoutMs);
      throw err;
    }
    this.#granted.delete(owner);
    this.#granted.set(owner, { token, tokenKey });
    // Leases never released (their process lost them) are forgotten, oldest first.
    if (this.#granted.size > MAX_GRANTED) this.#granted.delete(this.#granted.keys().next().value);
  }

  /**
   * A renewal the replicas do not hold is a failure (the engine retries while the lease
   * lasts); one that answered false is final, and waits for nothing.
   */
  async renewed(lease, owner, key, renewed) {
    if (!renewed) return;
    const permit = this.#granted.get(owner);
    if (permit?.tokenKey === undefined) await awaitReplicas(this.#redis, lease, this.#settings, `the renewal of ${describe(key)}`, (holder) => holder === owner);
    else await awaitReplicas(this.#redis, permit.tokenKey, this.#settings, `the renewal of ${describe(key)}`, (stored) => Number(stored) >= permit.token);
  }

  /** A token floor the release raised (a token handed over locally, above the grant's) must outlive a failover too. */
  async released(tokenKey, owner, key, carried) {
    const granted = this.#granted.get(owner)?.token ?? 0;
    this.#granted.delete(owner);
    if (carried !== undefined && Number(carried) > granted) {
      const floor = Number(carried);
      await awaitReplicas(this.#redis, tokenKey, this.#settings, `the token floor of ${describe(key)}`, (stored) => Number(stored) >= floor);
    }
  }
}

module.exports = { replicaSettings, ReplicaAcknowledgement, ReplicaAcknowledgementError };
