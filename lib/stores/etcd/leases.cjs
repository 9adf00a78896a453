'use strict';
/**
 * An EtcdLockStore's etcd leases, and how its requests outlive a lost member:
 * - Leases are reused: a released holder's lease (its key deleted) is kept for the next
 *   acquire with the same ttl, which refreshes it with a keep-alive sent with its
 *   transaction, instead of a revoke now and a grant then (two more writes through
 *   consensus per lock). Kept leases hold no key, and lapse on their own within their
 *   ttl; `close()` revokes them.
 * - A request that may run twice (a transaction, a lease grant, a keep-alive) is sent
 *   again after a timeout or a lost member, with a gRPC deadline that leaves room for
 *   the retry (`retried`, `callOptions`).
 */
const { isTransient, leaseSeconds } = require('./requests.cjs');

function noop() {}

// Kept leases per ttl, at most.
const MAX_KEPT_LEASES = 32;
// A kept lease is reused only while it has at least this long left.
const KEPT_MARGIN_MS = 500;
// A request retried after a timeout or a lost member (see retried) waits this long first.
const RETRY_PAUSE_MS = 50;
// The shortest gRPC deadline a try of such a request gets.
const MIN_SLICE_MS = 250;

class EtcdLeases {
  #client;
  #keepAlives;
  #kept = new Map(); // lease seconds -> kept leases
  /** Set by the store's close(): a lease let go is revoked, not kept. */
  closed = false;

  /**
   * @param {object} leaseClient  the client's `leaseClient`
   * @param {import('./keepalive.cjs').KeepAlives} keepAlives  the store's keep-alive stream
   */
  constructor(leaseClient, keepAlives) {
    this.#client = leaseClient;
    this.#keepAlives = keepAlives;
  }

  /** Revokes every kept lease; resolves when all were sent. */
  revokeKept() {
    const work = [];
    for (const leases of this.#kept.values()) for (const lease of leases) work.push(this.revoke(lease));
    this.#kept.clear();
    return work;
  }

  /**
   * Runs `call` (a request that may run twice: an acquire's transaction, a lease grant)
   * again when it timed out or its member went away, until `until` (performance.now()):
   * a request in flight when a leader dies waits out etcd's request timeout (5 s and
   * more), longer than many a ttl, while a new leader answers within an election.
   */
  async retried(until, call) {
    for (;;) {
      try {
        return await call();
      } catch (err) {
        if (!isTransient(err) || performance.now() + RETRY_PAUSE_MS >= until) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
    }
  }

  /**
   * One keep-alive of `lease`, sent again until `until` while its stream fails: the
   * client opens each new stream on any of its hosts, a member that is down included.
   */
  keepAlive(lease, until) {
    return this.retried(until, () => this.#keepAlives.send(lease.id));
  }

  /**
   * gRPC call options whose deadline is a slice of the time left before `until`, so that
   * a retry fits. Read again by each attempt: the client sends a failed call again to its
   * next host with the same options, and a deadline already past would fail those at
   * once, each counted by that host's circuit breaker (3 in a row close the host to every
   * call of the client for 5 s: a whole cluster, after one election).
   */
  callOptions(until) {
    return {
      get deadline() {
        const now = performance.now();
        const left = until - now;
        const slice = Math.max(MIN_SLICE_MS, Math.min(left, Math.max(MIN_SLICE_MS, left / 2)));
        // Never later than one slice past `until`: the engine gives up on a try at its ttl.
        return Date.now() + Math.min(slice, until + MIN_SLICE_MS - now);
      },
    };
  }

  /** A kept lease of the ttl's seconds with time left, or a new one. */
  async take(ttlMs, { fresh = false } = {}) {
    const seconds = leaseSeconds(ttlMs);
    const kept = fresh ? undefined : this.#kept.get(seconds);
    const now = performance.now();
    while (kept !== undefined && kept.length > 0) {
      const lease = kept.pop();
      if (lease.keptAt + lease.granted * 1000 - KEPT_MARGIN_MS > now) {
        lease.fresh = false;
        return lease;
      }
    }
    const sentAt = performance.now();
    const until = sentAt + (2 * ttlMs) / 3;
    const reply = await this.retried(until, () => this.#client.leaseGrant({ TTL: seconds }, this.callOptions(until)));
    if (reply.error) throw new Error(`EtcdLockStore: etcd refused a lease of ${seconds} s: ${reply.error}`);
    return { id: String(reply.ID), seconds, granted: Number(reply.TTL), keptAt: sentAt, fresh: true };
  }

  /** Keeps a lease that holds no key any more for a later acquire (or revokes it). */
  keep(lease) {
    if (lease.foreign || this.closed) return void this.revoke(lease);
    let kept = this.#kept.get(lease.seconds);
    if (kept === undefined) {
      kept = [];
      this.#kept.set(lease.seconds, kept);
    }
    if (kept.length >= MAX_KEPT_LEASES) return void this.revoke(lease);
    kept.push(lease);
  }

  /** Revokes a lease (and with it any key it holds); errors are moot: it lapses anyway. */
  revoke(lease) {
    return Promise.resolve()
      .then(() => this.#client.leaseRevoke({ ID: lease.id }))
      .then(noop, noop);
  }
}

module.exports = { EtcdLeases };
