'use strict';
// The half of the engine's host that calls JS stores: it tells a store's kind by its
// shape, makes the calls the engine asks for (`call` effects, or a status word's
// request), checks what the store answers, and hands the answer, or the store's error,
// back to the engine. EngineHost (engine-host.cjs) extends it; the methods read the
// host's fields (`engine`, `stores`, `storeIds`, `execs`, `thrown`, ...) and call its
// `guard`, `ask`, `status` and `die`.

const { ANSWERED_RUNNING, settledByAnswer, SHARED_LIMIT, STORE_MEMORY, STORE_POLLED, STORE_ANNOUNCING, STORE_GRANTING } = require('./protocol.cjs');
const { describe } = require('../common/describe.cjs');
const { HOST, STORE_ID } = require('./symbols.cjs');

// The fourth argument of `acquire` on a store that grants on release: queue this owner
// when the key is held, to be handed the lease by the holder's release.
const QUEUE = Object.freeze({ queue: true });
// ... and for a try that will not wait (fail fast, or the last try at the deadline).
const NO_QUEUE = Object.freeze({ queue: false });
/**
 * The turn of a store that opts in to local handoff: its `localHandoff`, a non-negative
 * integer number of milliseconds (README, "Your own store"); undefined when it does not.
 */
function localHandoffTurn(store) {
  const turn = store.localHandoff;
  if (turn === undefined || turn === null || turn === false) return undefined;
  if (!Number.isSafeInteger(turn) || turn < 0) {
    throw new TypeError(`a store's localHandoff must be its turn, a non-negative integer number of milliseconds, got ${describe(turn)}`);
  }
  return turn;
}

/** The store-calling half of the EngineHost class of one API (`api`: see engine-host.cjs). */
function defineStoreCalls(api) {
  const { fromEngine } = api;

  class StoreCalls {

    registerStore(store) {
      if (store instanceof api.MemoryLockStore && store[HOST] === this) return { kind: STORE_MEMORY, id: store[STORE_ID] };
      let ref = this.storeIds.get(store);
      if (ref === undefined) {
        const id = this.nextStoreId++;
        const announces = typeof store.subscribe === 'function';
        ref = {
          kind: announces ? (store.grantsOnRelease === true ? STORE_GRANTING : STORE_ANNOUNCING) : STORE_POLLED,
          id,
          turn: localHandoffTurn(store),
        };
        // The engine hands this store's leases between its executions (core/src/engine/handoff.rs).
        if (ref.turn !== undefined) this.ask(() => this.engine.setStoreHandoff(id, ref.turn));
        this.storeIds.set(store, ref);
        this.stores.set(id, typeof WeakRef === 'function' ? new WeakRef(store) : { deref: () => store });
        this.storeGone?.register(store, id);
      }
      return ref;
    }

    callStore(fx) {
      // Only a clean-up release can outlive every user of its store; it is then moot.
      const store = this.stores.get(fx.store)?.deref();
      if (store === undefined) return this.guard(() => this.engine.answerRelease(fx.request, undefined, false));
      // The request holds its store until answered, so a late grant can still be
      // released through it after every user of the store is gone.
      fx.target = store;
      try {
        let pending;
        if (fx.method === 'acquire') {
          const granting = this.storeIds.get(store)?.kind === STORE_GRANTING;
          const lock = fx.exec === 0 ? undefined : this.execs.get(fx.exec)?.locks?.[fx.layer];
          if (lock !== undefined && lock.limit > 1) {
            // Permits: the store counts them (README, "A store of your own").
            const options = { queue: granting && fx.queue, limit: lock.limit, weight: lock.weight };
            pending = store.acquire(fx.key, fx.owner, fx.ttl, options);
          } else if (granting) pending = store.acquire(fx.key, fx.owner, fx.ttl, fx.queue ? QUEUE : NO_QUEUE);
          else pending = store.acquire(fx.key, fx.owner, fx.ttl);
        }
        else if (this.storeIds.get(store)?.turn !== undefined && fx.exec !== 0) {
          // The holder's token goes with its renewals and its release: the store's next
          // grant must be larger than every token handed over locally.
          // With one lock, its token is the execution's: the one its callback ran under
          // (`fx.token`, a release from `finish`), else the engine's `token`.
          const one = this.execs.get(fx.exec)?.locks.length === 1;
          const token = one ? (fx.token ?? this.engine.token(fx.exec)) : this.engine.layerToken(fx.exec, fx.layer);
          const carried = { fencingToken: token ?? 0 };
          if (fx.method === 'renew') pending = store.renew(fx.key, fx.owner, fx.ttl, carried);
          else pending = store.release(fx.key, fx.owner, carried);
        } else if (fx.method === 'renew') pending = store.renew(fx.key, fx.owner, fx.ttl);
        else pending = store.release(fx.key, fx.owner);
        Promise.resolve(pending).then(
          (value) => this.answer(fx, value),
          (error) => this.failed(fx, error),
        );
      } catch (error) {
        this.failed(fx, error);
      }
    }

    /**
     * Calls the JS store of `rec`'s lock 0 for `request`, which the engine handed back in
     * a status word instead of as an effect: an `acquire` (asking to queue with `queue`)
     * with the lock's key and ttl and the owner the engine gave the lock, or a
     * `release` with the key and owner of that acquire.
     */
    callLayer0(rec, request, acquire, queue) {
      const lock = rec.locks[0];
      const fx = {
        request,
        exec: rec.id,
        layer: 0,
        store: lock.id,
        method: acquire ? 'acquire' : 'release',
        ttl: lock.ttlMs,
        key: undefined,
        owner: undefined,
        queue,
        // A release comes from `finish`: its callback ran under this token, lock 0's
        // when it is the only lock (the engine's `token(exec)`, without the call).
        token: acquire ? undefined : rec.context?._token,
      };
      if (!acquire) return this.callKept(fx, 0, rec.lockText);
      try {
        fx.owner = this.engine.layerOwner(rec.id, 0);
      } catch (error) {
        return this.failed(fx, fromEngine(error));
      }
      fx.key = rec.keys[0];
      rec.keepLockText(0, fx.key, fx.owner);
      return this.callStore(fx);
    }

    /**
     * Makes the call `fx` for lock `layer` of its execution with the key and owner that
     * lock's acquire kept (`text`, the execution's lock text), or else the engine's.
     * When the engine cannot say whose lock it is (it failed), the store is not called
     * and the engine is told the call failed, as if the store had thrown.
     */
    callKept(fx, layer, text) {
      try {
        fx.key = text?.[2 * layer] ?? this.engine.layerKey(fx.exec, layer);
        fx.owner = text?.[2 * layer + 1] ?? this.engine.layerOwner(fx.exec, layer);
      } catch (error) {
        return this.failed(fx, fromEngine(error));
      }
      return this.callStore(fx);
    }

    answer(fx, value) {
      const engine = this.engine;
      if (fx.method === 'acquire') {
        if (value === undefined || value === null) return this.answered(fx, true, undefined);
        let token;
        let got;
        let limit;
        try {
          // A getter or a proxy of the store's may throw here: that is the store failing.
          token = typeof value === 'object' ? value.fencingToken : undefined;
          // `{ limit }`: the key is held with another limit (permits).
          limit = token === undefined && typeof value === 'object' ? value.limit : undefined;
          if (!(Number.isSafeInteger(token) && token >= 0)) {
            got = typeof value === 'object' ? `{ fencingToken: ${describe(token)} }` : describe(value);
          }
        } catch (error) {
          return this.failed(fx, error);
        }
        if (got === undefined) return this.answered(fx, true, token);
        if (Number.isSafeInteger(limit) && limit >= 1 && limit <= SHARED_LIMIT) {
          return this.guard(() => engine.answerLimit(fx.request, limit));
        }
        return this.guard(() =>
          engine.answerFailed(
            fx.request,
            `acquire must resolve to { fencingToken: <non-negative safe integer> } or undefined, got ${got}`,
          ),
        );
      }
      if (fx.method === 'renew') {
        if (typeof value === 'boolean') return this.guard(() => engine.answerRenew(fx.request, value));
        return this.guard(() => engine.answerFailed(fx.request, `renew must resolve to a boolean, got ${describe(value)}`));
      }
      return this.answered(fx, false, typeof value === 'boolean' ? value : undefined);
    }

    /**
     * Hands an acquire's answer (`acquire`: `value` is the token, or undefined) or a
     * release's to the engine, which may give back, in the status word, the one thing
     * left to do: run the execution (the answer granted its innermost lock: under that
     * token) or settle it (the release was its last). No effect waits then. Only where
     * nothing else runs (as for a handoff): a status word would overtake the effects
     * being applied.
     */
    answered(fx, acquire, value) {
      if (this.dead) return undefined;
      const engine = this.engine;
      const direct = !this.draining && !this.handing;
      let word;
      try {
        word = acquire ? engine.answerAcquire(fx.request, value, direct) : engine.answerRelease(fx.request, value, direct);
      } catch (error) {
        this.die(fromEngine(error));
        return undefined;
      }
      const result = this.status(word);
      if (result === 0) return undefined;
      const rec = this.execs.get(fx.exec);
      if (rec === undefined) return undefined;
      if (result === ANSWERED_RUNNING) return rec.run(value);
      return rec.settled(settledByAnswer(result));
    }

    failed(fx, error) {
      const request = fx.request;
      this.thrown.set(request, error);
      // An acquire's error is the cause of the execution's rejection, which may come only
      // after its outer locks are released: keep it with the execution until then.
      if (fx.method === 'acquire') this.execs.get(fx.exec)?.keepCause(request, error);
      try {
        this.guard(() => this.engine.answerFailed(request, undefined));
      } finally {
        if (!this.draining) this.thrown.delete(request);
      }
    }
  }
  return StoreCalls;
}

module.exports = { defineStoreCalls };
