'use strict';
// The keys an engine host watches for the engine on stores that announce releases: a
// `watch` effect subscribes (`store.subscribe(key, wake)`), and each announcement or
// grant is handed to the engine, which decides which waiter it wakes.

const { GRANT_CLAIMED, STORE_ANNOUNCING, STORE_GRANTING } = require('./protocol.cjs');

/** A grant as a store that grants on release passes it to its `subscribe` listener. */
function isGrant(grant) {
  return (
    grant !== null &&
    typeof grant === 'object' &&
    typeof grant.owner === 'string' &&
    Number.isSafeInteger(grant.fencingToken) &&
    grant.fencingToken >= 0 &&
    (grant.age === undefined || (typeof grant.age === 'number' && grant.age >= 0))
  );
}

/** The subscriptions of one engine host, by store id and key. */
class Watchers {
  constructor(host) {
    this.host = host;
    // `${storeId}\u0000${key}` -> the stop function `subscribe` returned.
    this.stops = new Map();
  }

  /** Carries out a `watch` effect: `{ store, watch, key }` (watch false: stop watching). */
  apply(fx) {
    const host = this.host;
    const name = `${fx.store}\u0000${fx.key}`;
    if (!fx.watch) {
      const stop = this.stops.get(name);
      this.stops.delete(name);
      try {
        if (typeof stop === 'function') stop();
      } catch {
        // A store that fails to unsubscribe costs a wasted wake-up, nothing more.
      }
      return;
    }
    const store = host.stores.get(fx.store)?.deref();
    if (store === undefined) return;
    const key = fx.key;
    const kind = host.storeIds.get(store)?.kind ?? STORE_ANNOUNCING;
    // Returns true when it claims a grant: the store releases a grant nobody claims.
    const wake = (grant) => {
      if (kind === STORE_GRANTING && isGrant(grant)) {
        const { owner, fencingToken } = grant;
        const age = grant.age ?? -1; // unknown: the engine counts from the owner's try in flight
        return host.guard(() => host.engine.granted(kind, fx.store, key, owner, fencingToken, age)) === GRANT_CLAIMED;
      }
      // A plain announcement, or a grant this engine cannot read: the first waiter
      // asks the store, which answers with the lease if it is the waiter's.
      host.guard(() => host.engine.released(kind, fx.store, key));
      return false;
    };
    try {
      this.stops.set(name, store.subscribe(key, wake));
    } catch {
      // Without announcements the waiters poll, as for any other store.
    }
  }
}

module.exports = { Watchers };
