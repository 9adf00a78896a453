'use strict';
// The JavaScript host of the Rust engine, shared by the native addon and the wasm
// module. The engine decides everything (when to try, poll, renew, when a lease is
// lost, who is woken, how an execution settles); this file only carries out what it
// asks: it calls JS stores and reports their answers, runs callbacks, aborts signals,
// keeps one timer, and turns results into Promises and error classes.

const { LockNotAcquiredError, LockLostError, LockStoreError, isRejection, fromEngine: engineError } = require('./errors.cjs');
const { checkWellFormed } = require('./well-formed.cjs');
const { describe, checkOptionNames } = require('./describe.cjs');

const {
  STATUS_EFFECTS,
  STATUS_TIMER_REF,
  STATUS_TIMER_UNREF,
  STATUS_TIMER_ARM,
  STATUS_HOST_BITS,
  statusOf,
  payloadOf,
  resultOf,
  STARTED_RUNNING,
  STARTED_STORE_CALL,
  STARTED_STORE_CALL_QUEUED,
  FINISHED_VALUE,
  FINISHED_CALLBACK_ERROR,
  FINISHED_LOST,
  FINISHED_NOT_HELD,
  finishSettlement,
  finishHandsOff,
  finishCallsStore,
  ANSWERED_RUNNING,
  settledByAnswer,
  GRANT_CLAIMED,
  EXTENDED,
  NOT_EXTENDED,
  MEMORY_RELEASED,
  OPTION_RENEW,
  OPTION_TELEMETRY,
  OPTION_MANUAL,
  OPTION_DIRECT,
  STORE_MEMORY,
  STORE_POLLED,
  STORE_ANNOUNCING,
  STORE_GRANTING,
  EFFECT_WIDTH,
  EFFECT_FIRST,
  stringCount,
  decodeEffect,
} = require('./protocol.cjs');

// The fourth argument of `acquire` on a store that grants on release: queue this owner
// when the key is held, to be handed the lease by the holder's release.
const QUEUE = Object.freeze({ queue: true });
// ... and for a try that will not wait (fail fast, or the last try at the deadline).
const NO_QUEUE = Object.freeze({ queue: false });
const MAX_TIMER_MS = 2 ** 31 - 1;
const NO_STRINGS = [];

/** The key of the fencing token in `context.properties`. */
const LOCK_TOKEN = 'leasehold.lockToken';

const HOST = Symbol('leasehold.host');
const STORE_ID = Symbol('leasehold.storeId');
const TIME_PROVIDER = Symbol('leasehold.timeProvider');

function noop() {}

// Node and Bun timers are objects with ref()/unref(); Deno's are numbers, ref'd and
// unref'd through Deno.refTimer/unrefTimer; browsers have neither, and never wait for
// a timer before closing a page.
function refTimer(timer) {
  if (typeof timer === 'object') timer?.ref?.();
  else if (timer !== undefined) globalThis.Deno?.refTimer?.(timer);
}
function unrefTimer(timer) {
  if (typeof timer === 'object') timer?.unref?.();
  else if (timer !== undefined) globalThis.Deno?.unrefTimer?.(timer);
}

function falsy() {
  return false;
}

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

// The wasm engine's per-execution calls, over its `*Fast` exports that answer plain
// numbers (-1: an error, kept for `takeError`, or no token): wasm-bindgen hands a
// `Result` or an `Option` over as an array, one allocation per call.
function startDefinedFast(exec, options, lock) {
  const status = this.startDefinedFast(exec, options, lock);
  if (status < 0) throw this.takeError();
  return status;
}
function finishFast(exec, ok, handoff) {
  const status = this.finishFast(exec, ok, handoff);
  if (status < 0) throw this.takeError();
  return status;
}
function tokenFast(exec) {
  const token = this.tokenFast(exec);
  return token < 0 ? undefined : token;
}

function useFastCalls(Engine) {
  const proto = Engine.prototype;
  if (typeof proto?.finishFast !== 'function' || proto.finish === finishFast) return;
  Object.defineProperties(proto, {
    startDefined: { value: startDefinedFast, writable: true, configurable: true },
    finish: { value: finishFast, writable: true, configurable: true },
    token: { value: tokenFast, writable: true, configurable: true },
  });
}

function createApi(binding, options) {
  useFastCalls(binding.Engine);
  const fromEngine = (error) => engineError(error, binding.takePanic);
  const engineName = options.engine;
  const AsyncLocalStorage = options.AsyncLocalStorage;
  const ambient = AsyncLocalStorage ? new AsyncLocalStorage() : undefined;
  // Where a wait on an in-process store cannot be served (workerd: see lib/workerd.mjs),
  // the reason: a lock that would wait on the system clock's memory store throws it at once.
  const memoryWaitRefused = options.memoryWaitRefused;
  // Without AsyncLocalStorage (browsers), the ambient context is the one whose callback
  // is running synchronously right now.
  let syncContext;

  function checkDuration(value, arg, { infiniteOk }) {
    try {
      if (typeof value === 'number') return binding.checkDuration(value, undefined, arg, infiniteOk);
      if (typeof value === 'string') {
        // Checked here: the engine would show a lone surrogate as U+FFFD, hiding the fault.
        checkWellFormed(value, arg);
        return binding.checkDuration(undefined, value, arg, infiniteOk);
      }
    } catch (error) {
      if (error instanceof TypeError) throw error;
      throw fromEngine(error);
    }
    throw new TypeError(`${arg} must be milliseconds (a number) or a duration string like '30s', got ${describe(value)}`);
  }

  function randomSeed() {
    const seed = new Uint8Array(32);
    globalThis.crypto.getRandomValues(seed);
    return seed;
  }

  // ---- the host of one engine (one time source) -----------------------------------

  class EngineHost {
    constructor(fake, start) {
      this.startAt = start;
      this.fake = fake;
      this.execs = new Map();
      // Stores by id, held weakly: whoever uses a store (a pipeline, a lease) holds it;
      // once nothing does, its entry goes with it.
      this.stores = new Map();
      // store -> { id, kind }: a store's kind is read once, when first used.
      this.storeIds = new WeakMap();
      this.storeGone =
        typeof FinalizationRegistry === 'function' ? new FinalizationRegistry((id) => this.stores.delete(id)) : undefined;
      // A MemoryLockStore collected: the engine forgets its leases and reuses its id.
      this.memoryStoreGone =
        typeof FinalizationRegistry === 'function'
          ? new FinalizationRegistry((id) =>
              this.guard(() => {
                this.engine.dropMemoryStore(id);
                return 0;
              }),
            )
          : undefined;
      // A pipeline collected: its definition of its lock goes, and with the last one the
      // engine's copy of the key (see ResiliencePipeline#defineLock).
      this.definedLockGone =
        typeof FinalizationRegistry === 'function'
          ? new FinalizationRegistry((id) =>
              this.guard(() => {
                this.engine.undefineLock(id);
                return 0;
              }),
            )
          : undefined;
      this.nextStoreId = 1;
      this.nextExec = 0;
      this.thrown = new Map();
      this.watchers = new Map();
      this.draining = false;
      // Running an execution handed over by `finish` (see `handoff`).
      this.handing = false;
      this.more = false;
      // Executions settled while effects were applied; dropped once they are (`forget`).
      this.forgotten = undefined;
      this.dead = undefined;
      this.timer = undefined;
      // The setTimeout that armed the timer, and its clearTimeout.
      this.timerSetWith = undefined;
      this.timerClearWith = undefined;
      this.defaultStoreInstance = undefined;
    }

    /**
     * The engine, created (and seeded) on first use, so pipelines can be built at module
     * load where a runtime forbids random values there (workerd). Then an own property.
     */
    get engine() {
      let engine;
      try {
        engine = new binding.Engine(this.fake, this.startAt, randomSeed());
      } catch (error) {
        throw fromEngine(error);
      }
      Object.defineProperty(this, 'engine', { value: engine, writable: true, configurable: true });
      return engine;
    }

    get defaultStore() {
      if (!this.defaultStoreInstance) this.defaultStoreInstance = MemoryLockStore[HOST](this, 0);
      return this.defaultStoreInstance;
    }

    newExecId() {
      do {
        this.nextExec = (this.nextExec + 1) >>> 0;
      } while (this.nextExec === 0 || this.execs.has(this.nextExec));
      return this.nextExec;
    }

    /** Handles the host part of a status word; returns the call's own result bits. */
    status(status) {
      // A retired engine arms no timer and applies no effect any more.
      if (status & STATUS_HOST_BITS && !this.dead) this.housekeep(status);
      // A timer armed through another setTimeout than the one in use now (global fake
      // timers installed or removed since) may never fire: the engine is told it is lost.
      if (this.timer !== undefined && this.timerSetWith !== setTimeout && !this.dead) this.timerLost();
      return resultOf(status);
    }

    housekeep(status) {
      if (status & STATUS_TIMER_ARM) {
        this.arm(this.engine.armAt(), (status & STATUS_TIMER_UNREF) === 0);
      } else if (status & STATUS_TIMER_REF) {
        refTimer(this.timer);
      } else if (status & STATUS_TIMER_UNREF) {
        // No engine timer that keeps the process alive is live: the process may exit.
        // Unref'ing at once, and ref'ing again when the next execution starts, costs tens
        // of nanoseconds; deferring it to the end of the turn with an immediate cost an
        // extra turn of the event loop (about a microsecond) after every execution on a
        // JS store, each of which ends in a turn of its own.
        unrefTimer(this.timer);
      }
      if (status & STATUS_EFFECTS) this.drain();
    }

    /** Arms the one timer at engine time `at`; it holds the process only with `keepAlive`. */
    arm(at, keepAlive) {
      this.clearTimer();
      const delay = Math.min(Math.max(0, at - this.engine.now()), MAX_TIMER_MS);
      const timer = setTimeout(() => {
        if (this.timer !== timer) return;
        this.timer = undefined;
        this.guard(() => this.engine.onTimer());
      }, delay);
      this.timer = timer;
      this.timerSetWith = setTimeout;
      this.timerClearWith = clearTimeout;
      if (!keepAlive) unrefTimer(timer);
    }

    /** Clears the timer with the clearTimeout that goes with the setTimeout that armed it. */
    clearTimer() {
      const timer = this.timer;
      if (timer === undefined) return;
      this.timer = undefined;
      try {
        this.timerClearWith(timer);
      } catch {
        // A clearTimeout that refuses it: the timer's callback sees it is no longer the
        // host's, and it holds nothing meanwhile.
        unrefTimer(timer);
      }
    }

    /** The armed timer may never fire: the engine runs what is due and asks for a new one. */
    timerLost() {
      this.clearTimer();
      this.guard(() => this.engine.onTimer());
    }

    /**
     * Calls the engine from a timer, a store's answer or a finalizer, where nobody could
     * catch an engine failure: it rejects the executions of this engine instead of crashing.
     */
    guard(fn) {
      if (this.dead) return undefined;
      let status;
      try {
        status = fn();
      } catch (error) {
        this.die(fromEngine(error));
        return undefined;
      }
      return this.status(status);
    }

    /**
     * The engine failed (a caught panic, a wasm trap) where no caller could be told: its
     * state is unknown, so it is treated as dead. Its timer stops, so nothing renews a
     * lease any more: running callbacks and auto-renewed leases are told as for a loss.
     * Its executions reject, and later executions on it reject at once.
     */
    die(failure) {
      this.dead = failure;
      this.clearTimer();
      for (const rec of [...this.execs.values()]) rec.retire(failure);
      this.execs.clear();
    }

    /** Calls the engine for a value (not a status word); a failure of the engine itself is re-thrown as an Error. */
    ask(fn) {
      try {
        return fn();
      } catch (error) {
        throw fromEngine(error);
      }
    }

    /** Calls the engine; a failure of the engine itself (a caught panic) is re-thrown as an Error. */
    call(fn) {
      return this.status(this.ask(fn));
    }

    /**
     * Runs execution `next`, which the engine granted in a `finish` call and handed back
     * in its status word instead of a `run` effect. Finishes inside it drain effects as
     * usual: a chain of synchronous callbacks runs one after the other, not nested.
     */
    handoff(next) {
      const rec = this.execs.get(next);
      if (!rec) return;
      this.handing = true;
      try {
        rec.run();
      } catch (error) {
        // The previous holder is settled already: a failure here is this execution's
        // (its lock is released through `finish` once its callback could have run).
        if (rec instanceof Execution && rec.running) rec.finish(false, error);
        else rec.fail(error);
      } finally {
        this.handing = false;
      }
    }

    /**
     * Drops a settled execution's record, once the effects being applied are done: an
     * execution that settles inside a drain (a synchronous callback run by it) still has
     * its own events among the effects taken next.
     */
    forget(id) {
      if (this.draining) (this.forgotten ??= []).push(id);
      else this.execs.delete(id);
    }

    drain() {
      if (this.draining) {
        // Effects produced while applying a batch are taken in the next round.
        this.more = true;
        return;
      }
      this.draining = true;
      let failure;
      try {
        do {
          this.more = false;
          // Flat effects (lib/protocol.cjs); text only when the header says there is some.
          const numbers = this.engine.takeEffects();
          const strings = stringCount(numbers) > 0 ? this.engine.takeStrings() : NO_STRINGS;
          for (let i = EFFECT_FIRST; i < numbers.length; i += EFFECT_WIDTH) {
            // One effect's failure must not drop the rest of the batch.
            try {
              decodeEffect(numbers, i, strings, this);
            } catch (error) {
              failure ??= { error };
            }
          }
        } while (this.more);
      } finally {
        this.draining = false;
        // Thrown store errors are kept until the effects that may cite them as a cause are done.
        this.thrown.clear();
        if (this.forgotten !== undefined) {
          for (const id of this.forgotten) this.execs.delete(id);
          this.forgotten = undefined;
        }
      }
      if (failure) throw failure.error;
    }

    // ---- effects, as decodeEffect hands them over ----

    callEffect(fx, layer) {
      // An acquire comes with the text; its renewals and its release without.
      if (fx.key === undefined) return this.callKept(fx, layer, this.execs.get(fx.exec)?.lockText);
      if (fx.exec !== 0) this.execs.get(fx.exec)?.keepLockText(layer, fx.key, fx.owner);
      return this.callStore(fx);
    }

    runEffect(exec, token) {
      return this.execs.get(exec)?.run(token);
    }

    lostEffect(exec, layer) {
      return this.execs.get(exec)?.lost(layer);
    }

    settledEffect(exec, fx) {
      return this.execs.get(exec)?.settled(fx);
    }

    extendedEffect(exec, ok) {
      return this.execs.get(exec)?.extended(ok);
    }

    watchEffect(fx) {
      return this.watch(fx);
    }

    eventEffect(exec, fx) {
      const rec = this.execs.get(exec);
      if (!rec) return undefined;
      return rec.event(fx, fx.cause ? this.thrown.get(fx.cause) : undefined);
    }

    // ---- JS stores ----

    registerStore(store) {
      if (store instanceof MemoryLockStore && store[HOST] === this) return { kind: STORE_MEMORY, id: store[STORE_ID] };
      let ref = this.storeIds.get(store);
      if (ref === undefined) {
        const id = this.nextStoreId++;
        const announces = typeof store.subscribe === 'function';
        ref = { kind: announces ? (store.grantsOnRelease === true ? STORE_GRANTING : STORE_ANNOUNCING) : STORE_POLLED, id };
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
          pending =
            this.storeIds.get(store)?.kind === STORE_GRANTING
              ? store.acquire(fx.key, fx.owner, fx.ttl, fx.queue ? QUEUE : NO_QUEUE)
              : store.acquire(fx.key, fx.owner, fx.ttl);
        }
        else if (fx.method === 'renew') pending = store.renew(fx.key, fx.owner, fx.ttl);
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
        store: lock.id,
        method: acquire ? 'acquire' : 'release',
        ttl: lock.ttlMs,
        key: undefined,
        owner: undefined,
        queue,
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
        try {
          // A getter or a proxy of the store's may throw here: that is the store failing.
          token = typeof value === 'object' ? value.fencingToken : undefined;
          if (!(Number.isSafeInteger(token) && token >= 0)) {
            got = typeof value === 'object' ? `{ fencingToken: ${describe(token)} }` : describe(value);
          }
        } catch (error) {
          return this.failed(fx, error);
        }
        if (got === undefined) return this.answered(fx, true, token);
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

    watch(fx) {
      const name = `${fx.store}\u0000${fx.key}`;
      if (!fx.watch) {
        const stop = this.watchers.get(name);
        this.watchers.delete(name);
        try {
          if (typeof stop === 'function') stop();
        } catch {
          // A store that fails to unsubscribe costs a wasted wake-up, nothing more.
        }
        return;
      }
      const store = this.stores.get(fx.store)?.deref();
      if (store === undefined) return;
      const key = fx.key;
      const kind = this.storeIds.get(store)?.kind ?? STORE_ANNOUNCING;
      // Returns true when it claims a grant: the store releases a grant nobody claims.
      const wake = (grant) => {
        if (kind === STORE_GRANTING && isGrant(grant)) {
          const { owner, fencingToken } = grant;
          const age = grant.age ?? -1; // unknown: the engine counts from the owner's try in flight
          return this.guard(() => this.engine.granted(kind, fx.store, key, owner, fencingToken, age)) === GRANT_CLAIMED;
        }
        // A plain announcement, or a grant this engine cannot read: the first waiter
        // asks the store, which answers with the lease if it is the waiter's.
        this.guard(() => this.engine.released(kind, fx.store, key));
        return false;
      };
      try {
        this.watchers.set(name, store.subscribe(key, wake));
      } catch {
        // Without announcements the waiters poll, as for any other store.
      }
    }
  }

  const systemHost = { instance: undefined };
  function systemEngineHost() {
    if (!systemHost.instance) systemHost.instance = new EngineHost(false, 0);
    return systemHost.instance;
  }

  function hostOf(timeProvider, arg) {
    if (timeProvider === undefined) return systemEngineHost();
    if (timeProvider instanceof FakeTimeProvider) return timeProvider[HOST];
    throw new TypeError(`${arg} must be a FakeTimeProvider or undefined (the system clock), got ${describe(timeProvider)}`);
  }

  // ---- time ---------------------------------------------------------------------------

  // A fraction within a nanosecond of the next millisecond is float error, not time:
  // 3 × (1000 / 3) adds up to 999.99999999999994.
  const NANOSECOND = 1e-6;

  /** `ms` as whole milliseconds, which is all the engine counts, and the fraction left over. */
  function splitMillis(ms) {
    const whole = Math.floor(ms);
    if (ms - whole > 1 - NANOSECOND) return { whole: whole + 1, fraction: 0 };
    return { whole, fraction: ms - whole };
  }

  /**
   * A clock that moves only when told to; every engine timer on it (polls, renewals,
   * expiries) runs as it moves. The engine counts whole milliseconds: the clock keeps the
   * fraction of one, so that steps of a fraction add up to their sum.
   */
  class FakeTimeProvider {
    #fraction;

    constructor(start = 0) {
      // Beyond Number.MAX_SAFE_INTEGER, times no longer pass exactly between JS numbers
      // and the engine's whole milliseconds, and near the top of the engine's range
      // `now + ttl` saturates: a lease would end as it starts, and exclude nobody.
      if (typeof start !== 'number') throw new TypeError(`start must be a number of milliseconds, got ${describe(start)}`);
      if (!(start >= 0 && start <= Number.MAX_SAFE_INTEGER)) {
        throw new RangeError(`start must be a number of milliseconds from 0 to Number.MAX_SAFE_INTEGER, got ${describe(start)}`);
      }
      const { whole, fraction } = splitMillis(start);
      this.#fraction = fraction;
      this[HOST] = new EngineHost(true, whole);
    }

    /** The fake time, in milliseconds. */
    now() {
      const host = this[HOST];
      return host.ask(() => host.engine.now()) + this.#fraction;
    }

    /** Moves time forward by `ms`, running every due timer at its own instant, in order. */
    advance(ms) {
      if (typeof ms !== 'number') throw new TypeError(`ms must be a number of milliseconds, got ${describe(ms)}`);
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`ms must be a non-negative finite number, got ${describe(ms)}`);
      const host = this[HOST];
      const { whole, fraction } = splitMillis(this.#fraction + ms);
      const now = host.ask(() => host.engine.now());
      if (now + whole + fraction > Number.MAX_SAFE_INTEGER) {
        throw new RangeError(`ms must not move the clock (now ${now + this.#fraction}) past Number.MAX_SAFE_INTEGER, got ${describe(ms)}`);
      }
      host.call(() => host.engine.advance(whole));
      this.#fraction = fraction;
    }
  }

  // ---- the memory store ---------------------------------------------------------------

  function checkKey(key, arg = 'key') {
    if (typeof key !== 'string') throw new TypeError(`${arg} must be a non-empty string, got ${describe(key)}`);
    if (key.length === 0) throw new TypeError(`${arg} must be a non-empty string, got ""`);
    checkWellFormed(key, arg);
  }

  function checkTtlMs(ttlMs) {
    if (typeof ttlMs !== 'number') throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(ttlMs)}`);
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`ttlMs must be a positive finite number, got ${describe(ttlMs)}`);
    return checkDuration(ttlMs, 'ttlMs', { infiniteOk: false });
  }

  /** Asks `store`'s engine `fn(engine, storeId)`; a failure of the engine itself is an Error. */
  function askMemory(store, fn) {
    const host = store[HOST];
    return host.ask(() => fn(host.engine, store[STORE_ID]));
  }

  /** The in-process store, native to the engine: FIFO wake-up, monotonic tokens, bounded memory. */
  class MemoryLockStore {
    constructor(options = {}) {
      if (options === null || typeof options !== 'object') {
        throw new TypeError(`options must be an object, got ${describe(options)}`);
      }
      checkOptionNames(options, ['timeProvider'], 'MemoryLockStore');
      const host = hostOf(options.timeProvider, 'timeProvider');
      this[HOST] = host;
      this[TIME_PROVIDER] = options.timeProvider;
      this[STORE_ID] = host.ask(() => host.engine.createMemoryStore());
      host.memoryStoreGone?.register(this, this[STORE_ID]);
    }

    static [HOST](host, id) {
      const store = Object.create(MemoryLockStore.prototype);
      store[HOST] = host;
      store[STORE_ID] = id;
      return store;
    }

    /** Keys held or waited for. */
    get size() {
      return askMemory(this, (engine, id) => engine.memSize(id));
    }

    async acquire(key, owner, ttlMs) {
      checkKey(key);
      checkKey(owner, 'owner');
      const ttl = checkTtlMs(ttlMs);
      const token = askMemory(this, (engine, id) => engine.memAcquire(id, key, owner, ttl));
      return token === null || token === undefined ? undefined : { fencingToken: token };
    }

    async renew(key, owner, ttlMs) {
      checkKey(key);
      checkKey(owner, 'owner');
      const ttl = checkTtlMs(ttlMs);
      return askMemory(this, (engine, id) => engine.memRenew(id, key, owner, ttl));
    }

    /** Ends `owner`'s lease; true when it held a live one. Wakes the first waiter. */
    async release(key, owner) {
      checkKey(key);
      checkKey(owner, 'owner');
      const host = this[HOST];
      return host.call(() => host.engine.memRelease(this[STORE_ID], key, owner)) === MEMORY_RELEASED;
    }

    /** Whether `key` has a live lease. Advisory: it may change right after. */
    async isLocked(key) {
      checkKey(key);
      return askMemory(this, (engine, id) => engine.memTtl(id, key)) != null;
    }

    /** Milliseconds left on the live lease of `key`, undefined when free. Advisory. */
    async ttl(key) {
      checkKey(key);
      return askMemory(this, (engine, id) => engine.memTtl(id, key)) ?? undefined;
    }
  }

  // ---- executions -----------------------------------------------------------------------

  /**
   * Keeps the key and owner of an acquire of lock `layer` on its execution: the engine
   * sends its renewals and its release without them (core/src/host.rs, flat effects).
   */
  function keepLockText(layer, key, owner) {
    const text = (this.lockText ??= []);
    text[2 * layer] = key;
    text[2 * layer + 1] = owner;
  }

  /** The abort reason for a lease on `key` that a retired engine no longer renews. */
  function unrenewed(key, failure) {
    return new LockLostError(key, `lease on lock '${key}' is no longer renewed: its engine failed`, { cause: failure });
  }

  /** The error a `settled` effect with outcome `error` stands for. */
  function errorOf(fx, host, callerSignal, causes) {
    switch (fx.code) {
      case 'LOCK_NOT_ACQUIRED':
        return new LockNotAcquiredError(fx.key, fx.message);
      case 'LOCK_LOST':
        return new LockLostError(fx.key, fx.message);
      case 'LOCK_STORE_FAILED': {
        const options = fx.cause ? { cause: causes?.get(fx.cause) ?? host.thrown.get(fx.cause) } : undefined;
        return new LockStoreError(fx.key, fx.method, fx.message, options);
      }
      case 'ABORT_ERR':
        return callerSignal?.reason ?? new Error('the operation was aborted');
      default:
        return fromEngine(fx);
    }
  }

  class ResilienceContext {
    constructor(rec, operationKey) {
      this.operationKey = operationKey;
      this._rec = rec;
      this._controller = undefined;
      this._properties = undefined;
      this._token = undefined;
      // The context whose callback was running where this execution started (nested
      // locks), if still running then; see `liveContext`.
      this._outer = undefined;
    }

    /** Per-execution properties; the fencing token is under `LOCK_TOKEN`. Created on first read. */
    get properties() {
      if (!this._properties) {
        this._properties = new Map();
        if (this._token !== undefined) this._properties.set(LOCK_TOKEN, this._token);
      }
      return this._properties;
    }

    setToken(token) {
      this._token = token;
      if (this._properties) this._properties.set(LOCK_TOKEN, token);
    }

    /** Aborted when the caller cancels or the lease is lost. Created on first read. */
    get signal() {
      const rec = this._rec;
      if (!this._controller) {
        this._controller = new AbortController();
        if (rec.abortReason !== undefined) this._controller.abort(rec.abortReason);
      }
      return this._controller.signal;
    }

    abort(reason) {
      if (this._rec.abortReason !== undefined) return;
      this._rec.abortReason = reason;
      if (this._controller) this._controller.abort(reason);
    }
  }

  class Execution {
    constructor(host, pipeline, id, callback, context, locks, keys) {
      this.host = host;
      this.pipeline = pipeline;
      this.id = id;
      this.callback = callback;
      this.context = context;
      this.locks = locks;
      this.keys = keys;
      this.abortReason = undefined;
      this.lostLayer = -1;
      // Each lock lost while the callback ran is told once (`lost`).
      this.lostLayers = undefined;
      this.running = false;
      // The callback has settled: a lock lost later has no one left to tell.
      this.finished = false;
      this.value = undefined;
      this.error = undefined;
      this.resolve = undefined;
      this.reject = undefined;
      this.callerSignal = undefined;
      this.onCallerAbort = undefined;
      // [key, owner, ...] of each lock's acquire on a JS store (`keepLockText`).
      this.lockText = undefined;
    }

    /** Every lock is held: run the callback under its token; resolve via `finish`. */
    run(token) {
      this.running = true;
      if (token === undefined) {
        try {
          token = this.host.engine.token(this.id) ?? undefined;
        } catch (error) {
          // The engine failed (a caught panic) while handing the locks over: the
          // callback never runs, the execution rejects, and its locks are released.
          return this.finish(false, fromEngine(error));
        }
      }
      this.context.setToken(token);
      // The caller may have aborted after the engine granted the locks but before this
      // run: the callback never runs then.
      if (this.callerSignal?.aborted) {
        this.context.abort(this.callerSignal.reason);
        return this.finish(false, this.callerSignal.reason);
      }
      let result;
      let thenable = false;
      const previous = syncContext;
      syncContext = this.context;
      try {
        result = ambient ? ambient.run(this.context, this.callback, this.context) : this.callback(this.context);
        thenable = result !== null && typeof result === 'object' && typeof result.then === 'function';
      } catch (error) {
        syncContext = previous;
        return this.finish(false, error);
      }
      syncContext = previous;
      if (thenable) {
        try {
          return (result instanceof Promise ? result : Promise.resolve(result)).then(
            (value) => this.finish(true, value),
            (error) => this.finish(false, error),
          );
        } catch (error) {
          // A Promise subclass whose `then` throws: the callback failed.
          return this.finish(false, error);
        }
      }
      return this.finish(true, result);
    }

    finish(ok, valueOrError) {
      const host = this.host;
      this.finished = true;
      // Detached work of this callback now reads an enclosing lock's token, if one is
      // still held; a finished context keeps no chain of finished ones behind it.
      const context = this.context;
      if (context._outer !== undefined) context._outer = liveContext(context._outer);
      if (ok) this.value = valueOrError;
      else this.error = valueOrError;
      let word;
      try {
        // A handoff only where nothing else runs: not while effects are applied, nor
        // inside a handed-over execution (its own finish drains instead).
        word = host.engine.finish(this.id, ok, !host.draining && !host.handing);
      } catch (error) {
        return this.fail(fromEngine(error));
      }
      const status = statusOf(word);
      // This execution settles before the effects the word announces are applied and
      // before the next holder runs: those may run the next holders' callbacks, and
      // settlements keep the order of the holders, also when a callback is synchronous.
      // Its record stays until the effects are applied: its own events are among them.
      let settled = true;
      switch (finishSettlement(status)) {
        case FINISHED_VALUE:
          this.settle(true, this.value);
          break;
        case FINISHED_CALLBACK_ERROR:
          this.settle(false, this.error);
          break;
        case FINISHED_LOST:
          this.settle(false, this.lostError(this.error));
          break;
        default:
          settled = false; // a `settled` effect follows once the store answers
      }
      try {
        host.status(status);
      } catch (error) {
        // Applying the effects failed (another execution's, as a rule): this execution
        // fails with it unless it has settled already.
        if (!settled) return this.fail(error);
      }
      if (settled) host.forget(this.id);
      // What this settlement starts (the caller's next execute) runs while the next
      // holder awaits, not between the two holders.
      if (finishHandsOff(status)) host.handoff(payloadOf(word));
      else if (finishCallsStore(status)) host.callLayer0(this, payloadOf(word), false, false);
      return undefined;
    }

    lostError(cause) {
      const key = this.keys[Math.max(0, this.lostLayer)];
      return new LockLostError(key, undefined, { cause });
    }

    lost(layer, reason = new LockLostError(this.keys[layer])) {
      if (this.lostLayer < 0) this.lostLayer = layer;
      (this.lostLayers ??= [])[layer] = true;
      const key = this.keys[layer];
      this.context.abort(reason);
      const onLockLost = this.locks[layer].onLockLost;
      if (onLockLost) {
        try {
          const result = onLockLost({ context: this.context, key });
          if (result && typeof result.then === 'function') result.then(undefined, () => {});
        } catch {
          // A throwing onLockLost must not break the engine; the loss is already signalled.
        }
      }
    }

    settled(fx) {
      if (fx.outcome === 'value') return this.done(true, this.value);
      if (fx.outcome === 'callbackError') return this.done(false, this.error);
      return this.done(false, this.errorFrom(fx));
    }

    errorFrom(fx) {
      if (fx.code === 'LOCK_LOST' && this.running) return this.lostError(this.error);
      return errorOf(fx, this.host, this.callerSignal, this.causes);
    }

    keepCause(request, error) {
      (this.causes ??= new Map()).set(request, error);
    }

    extended() {}

    fail(error) {
      return this.done(false, error);
    }

    /** The engine was retired (`die`): a running callback loses every lock it still held. */
    retire(failure) {
      if (this.running && !this.finished) {
        for (let layer = 0; layer < this.locks.length; layer++) {
          if (!this.lostLayers?.[layer]) this.lost(layer, unrenewed(this.keys[layer], failure));
        }
      }
      this.fail(failure);
    }

    done(ok, valueOrError) {
      this.host.execs.delete(this.id);
      this.settle(ok, valueOrError);
    }

    /** Resolves or rejects the execution's promise; its record is the caller's to drop. */
    settle(ok, valueOrError) {
      if (this.callerSignal) this.callerSignal.removeEventListener('abort', this.onCallerAbort);
      const { resolve, reject } = this;
      // The promise was made where `execute` was called, maybe inside an enclosing
      // callback, whose context AsyncLocalStorage keeps on it: once settled, the record
      // lets go of it, so that a context left reachable (by a timer of its callback)
      // keeps no chain of enclosing contexts alive.
      this.resolve = noop;
      this.reject = noop;
      // Nor does it keep the callback or its outcome: a nested execution's context,
      // kept by work its callback left behind, still refers to this one (`_outer`).
      this.callback = undefined;
      this.value = undefined;
      this.error = undefined;
      if (ok) resolve(valueOrError);
      else reject(valueOrError);
    }

    event(fx, thrown) {
      const telemetry = this.pipeline.telemetry;
      const lock = this.locks[fx.layer];
      const event = { type: fx.outcome, key: this.keys[fx.layer], name: lock.name, operationKey: this.context.operationKey };
      if (fx.outcome === 'acquired' || fx.outcome === 'rejected') event.waitedMs = fx.waited;
      if (fx.outcome === 'acquired' || fx.outcome === 'renewed') event.fencingToken = fx.token;
      if (fx.outcome === 'renewalFailed' || fx.outcome === 'releaseFailed') {
        event.error = thrown ?? new LockStoreError(event.key, fx.outcome === 'renewalFailed' ? 'renew' : 'release', fx.message);
      }
      try {
        telemetry(event);
      } catch {
        // Telemetry never breaks a lock.
      }
    }
  }
  Execution.prototype.keepLockText = keepLockText;

  // ---- pipelines --------------------------------------------------------------------

  const DEFAULT_TTL = 30_000;

  /*
   * Executions started inside one another synchronously (a callback, a store or a
   * telemetry listener that starts one, which starts one...): how deep the JS stack
   * holds them now. Past MAX_SYNC_NESTING the next one starts from a microtask, on a
   * fresh stack: the stack must not run out inside an engine call, where the wasm
   * engine would be left borrowed and unusable for every later lock on its clock.
   */
  const MAX_SYNC_NESTING = 64;
  let nesting = 0;
  function nested(start) {
    if (nesting >= MAX_SYNC_NESTING) return Promise.resolve().then(() => nested(start));
    nesting += 1;
    try {
      return start();
    } finally {
      nesting -= 1;
    }
  }

  // The option names each entry point takes (checkOptionNames).
  const LOCK_OPTIONS = ['key', 'ttl', 'wait', 'store', 'onLockLost', 'name'];
  const EXECUTE_OPTIONS = ['operationKey', 'signal'];
  const BUILDER_OPTIONS = ['timeProvider', 'telemetry'];
  const ACQUIRE_LOCK_OPTIONS = ['wait', 'signal', 'autoRenew', 'timeProvider'];
  const WITH_LOCK_OPTIONS = [...LOCK_OPTIONS, ...BUILDER_OPTIONS, ...EXECUTE_OPTIONS, 'skipOnLockFailure'];

  function refuseMemoryWait(waitMs, store, host) {
    if (memoryWaitRefused !== undefined && waitMs > 0 && store instanceof MemoryLockStore && host === systemHost.instance) {
      throw new TypeError(memoryWaitRefused);
    }
  }

  function normaliseLock(options, host) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`addLock options must be an object, got ${describe(options)}`);
    }
    checkOptionNames(options, LOCK_OPTIONS, 'addLock');
    const { key, ttl = DEFAULT_TTL, wait = 0, store, onLockLost, name } = options;
    if (key !== undefined && typeof key !== 'function' && typeof key !== 'string') {
      throw new TypeError(`key must be a string or a function (context) => string, got ${describe(key)}`);
    }
    if (key === '') throw new TypeError('key must be a non-empty string, got ""');
    // A fixed key is checked here, once; a key function's result at every execution.
    if (typeof key === 'string') checkWellFormed(key, 'key');
    const ttlMs = checkDuration(ttl, 'ttl', { infiniteOk: false });
    if (ttlMs <= 0) throw new RangeError(`ttl must be positive, got ${describe(ttl)}`);
    const waitMs = checkDuration(wait, 'wait', { infiniteOk: true });
    if (onLockLost !== undefined && typeof onLockLost !== 'function') {
      throw new TypeError(`onLockLost must be a function, got ${describe(onLockLost)}`);
    }
    if (name !== undefined && typeof name !== 'string') throw new TypeError(`name must be a string, got ${describe(name)}`);
    let target = host.defaultStore;
    if (store !== undefined) {
      checkStore(store);
      // A memory store's leases run on its own clock, which this pipeline does not move.
      if (store instanceof MemoryLockStore && store[HOST] !== host) {
        throw new TypeError(
          "store is a MemoryLockStore on another time provider than this lock's: its leases run on the store's clock (give both the same timeProvider)",
        );
      }
      target = store;
    }
    refuseMemoryWait(waitMs, target, host);
    const { kind, id } = host.registerStore(target);
    // The lock keeps its store alive: the host only holds stores weakly.
    return { key, ttlMs, waitMs, kind, id, store: target, onLockLost, name: name ?? 'lock' };
  }

  function resolveKey(lock, context) {
    let key = lock.key;
    if (typeof key === 'function') key = key(context);
    else if (key === undefined) key = context.operationKey;
    if (key === undefined && lock.key === undefined) {
      throw new TypeError('key is missing: pass addLock({ key }) or execute(cb, { operationKey })');
    }
    if (typeof key !== 'string' || key.length === 0) {
      throw new TypeError(`key must resolve to a non-empty string, got ${describe(key)}`);
    }
    checkWellFormed(key, lock.key === undefined ? 'operationKey' : 'key');
    return key;
  }

  class ResiliencePipeline {
    constructor(host, locks, telemetry) {
      this.host = host;
      this.locks = locks;
      this.telemetry = telemetry;
      this.options = telemetry ? OPTION_RENEW | OPTION_TELEMETRY : OPTION_RENEW;
      // A single lock with a fixed key is defined in the engine once, on first use (not
      // at build: workerd forbids the engine's random seed at module load), and then
      // started by id: no key or options cross the boundary per execution.
      this.definedLock = locks.length === 1 && typeof locks[0].key === 'string' ? undefined : -1;
      this.fixedKeys = this.definedLock === undefined ? [locks[0].key] : undefined;
    }

    defineLock() {
      const l = this.locks[0];
      const host = this.host;
      try {
        this.definedLock = host.engine.defineLock(l.kind, l.id, l.key, l.ttlMs, l.waitMs);
      } catch (error) {
        throw fromEngine(error);
      }
      // The definition is this pipeline's: the engine keeps the key only while the pipeline
      // lives (its executions hold it, and copy the key into their own locks).
      if (this.definedLock >= 0) host.definedLockGone?.register(this, this.definedLock);
      return this.definedLock;
    }

    /** Runs `callback` while holding every lock of the pipeline; resolves to its value. */
    execute(callback, options) {
      return nested(
        () =>
          new Promise((resolve, reject) => {
            try {
              this.begin(callback, options, resolve, reject);
            } catch (error) {
              reject(error);
            }
          }),
      );
    }

    /** Like `execute`, but never rejects: `{ ok: true, value }` or `{ ok: false, error }`. */
    settle(callback, options) {
      return this.execute(callback, options).then(
        (value) => ({ ok: true, value }),
        (error) => ({ ok: false, error }),
      );
    }

    begin(callback, options, resolve, reject) {
      if (typeof callback !== 'function') throw new TypeError(`callback must be a function, got ${describe(callback)}`);
      if (options !== undefined) {
        if (options === null || typeof options !== 'object' || Array.isArray(options)) {
          throw new TypeError(`execute options must be an object, got ${describe(options)}`);
        }
        checkOptionNames(options, EXECUTE_OPTIONS, 'execute');
      }
      const operationKey = options?.operationKey;
      if (operationKey !== undefined && typeof operationKey !== 'string') {
        throw new TypeError(`operationKey must be a string, got ${describe(operationKey)}`);
      }
      const signal = options?.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new TypeError(`signal must be an AbortSignal, got ${describe(signal)}`);
      }
      if (signal?.aborted) throw signal.reason;
      const host = this.host;
      if (host.dead) throw host.dead;
      const id = host.newExecId();
      const locks = this.locks;
      const context = new ResilienceContext(undefined, operationKey);
      const outer = ambient ? ambient.getStore() : syncContext;
      if (outer !== undefined) context._outer = liveContext(outer);
      const rec = new Execution(host, this, id, callback, context, locks, undefined);
      context._rec = rec;
      // A pipeline with one fixed key shares one array of keys (read only) between its executions.
      const keys =
        this.fixedKeys ??
        (locks.length === 1 ? [resolveKey(locks[0], context)] : locks.map((lock) => resolveKey(lock, context)));
      // A key function may have aborted the signal: its 'abort' event has fired already.
      if (signal?.aborted) throw signal.reason;
      rec.keys = keys;
      rec.resolve = resolve;
      rec.reject = reject;
      if (signal) {
        rec.callerSignal = signal;
        rec.onCallerAbort = () => {
          if (rec.running) context.abort(signal.reason);
          else host.call(() => host.engine.cancel(id));
        };
        signal.addEventListener('abort', rec.onCallerAbort, { once: true });
      }
      host.execs.set(id, rec);
      const engine = host.engine;
      const last = locks.length - 1;
      // The first acquire may come back in the status word, to be made at once, unless
      // effects are being applied: it would overtake those.
      const bits = host.draining || host.handing ? this.options : this.options | OPTION_DIRECT;
      let status;
      try {
        const defined = this.definedLock ?? this.defineLock();
        if (defined >= 0) {
          status = engine.startDefined(id, bits, defined);
        } else {
          for (let i = 0; i < last; i++) {
            const l = locks[i];
            engine.addLock(l.kind, l.id, keys[i], l.ttlMs, l.waitMs);
          }
          const l = locks[last];
          status = engine.start(id, bits, l.kind, l.id, keys[last], l.ttlMs, l.waitMs);
        }
      } catch (error) {
        host.execs.delete(id);
        if (signal) signal.removeEventListener('abort', rec.onCallerAbort);
        throw fromEngine(error);
      }
      // A synchronous grant carries the innermost token as the payload; a store call
      // handed back, its request.
      const result = host.status(statusOf(status));
      if (result === STARTED_RUNNING) rec.run(payloadOf(status));
      else if (result === STARTED_STORE_CALL || result === STARTED_STORE_CALL_QUEUED) {
        host.callLayer0(rec, payloadOf(status), true, result === STARTED_STORE_CALL_QUEUED);
      }
    }
  }

  class ResiliencePipelineBuilder {
    constructor(options = {}) {
      if (options === null || typeof options !== 'object') {
        throw new TypeError(`builder options must be an object, got ${describe(options)}`);
      }
      checkOptionNames(options, BUILDER_OPTIONS, 'ResiliencePipelineBuilder');
      const { timeProvider, telemetry } = options;
      this.host = hostOf(timeProvider, 'timeProvider');
      if (telemetry !== undefined && typeof telemetry !== 'function') {
        throw new TypeError(`telemetry must be a function (event) => void, got ${describe(telemetry)}`);
      }
      this.telemetry = telemetry;
      this.locks = [];
    }

    /** Adds a lock; the first added is outermost. Throws for bad options, never later. */
    addLock(options) {
      this.locks.push(normaliseLock(options, this.host));
      return this;
    }

    build() {
      if (this.locks.length === 0) throw new TypeError('a pipeline needs at least one addLock() before build()');
      return new ResiliencePipeline(this.host, this.locks.slice(), this.telemetry);
    }
  }

  // ---- manual leases ------------------------------------------------------------------

  /** A lease held by hand: release it (and extend it) yourself. */
  class LeaseHandle {
    constructor(rec, key, owner, fencingToken) {
      this.key = key;
      this.owner = owner;
      this.fencingToken = fencingToken;
      Object.defineProperty(this, '_rec', { value: rec });
    }

    /** Aborted with a `LockLostError` when an auto-renewed lease is lost. Created on first read. */
    get signal() {
      const rec = this._rec;
      if (!rec.controller) {
        rec.controller = new AbortController();
        if (rec.abortReason !== undefined) rec.controller.abort(rec.abortReason);
      }
      return rec.controller.signal;
    }

    /**
     * Releases the lease. True only if this owner still held it; false after a lapse or a
     * takeover. Rejects with a LockStoreError when the store fails to release it.
     */
    release() {
      return this._rec.release();
    }

    /** Pushes the lease out to now + `ttl` (default: its own ttl). False once it is gone. */
    extend(ttl) {
      return this._rec.extend(ttl);
    }
  }

  class LeaseExecution {
    constructor(host, id, key, callerSignal, autoRenew) {
      this.host = host;
      this.id = id;
      this.key = key;
      this.callerSignal = callerSignal;
      this.autoRenew = autoRenew;
      this.onCallerAbort = undefined;
      this.running = false;
      this.released = undefined;
      this.controller = undefined;
      this.abortReason = undefined;
      this.extends = [];
      this.store = undefined;
      this.resolve = undefined;
      this.reject = undefined;
      // [key, owner] of the lease's acquire on a JS store (`keepLockText`).
      this.lockText = undefined;
    }

    run() {
      this.running = true;
      if (this.callerSignal?.aborted) {
        // Granted, but the caller gave up first: hand the lease back at once.
        const reason = this.callerSignal.reason;
        this.detachCaller();
        this.release().catch(() => {});
        return this.reject(reason);
      }
      this.detachCaller();
      const engine = this.host.engine;
      let handle;
      try {
        const owner = this.lockText?.[1] ?? engine.layerOwner(this.id, 0);
        handle = new LeaseHandle(this, this.key, owner, engine.token(this.id));
      } catch (error) {
        // The engine failed (a caught panic) while handing the lease over: the caller
        // is told, and the lease nobody can hold is handed back.
        this.release().catch(() => {});
        return this.reject(fromEngine(error));
      }
      this.resolve(handle);
    }

    detachCaller() {
      if (this.callerSignal) this.callerSignal.removeEventListener('abort', this.onCallerAbort);
    }

    lost() {
      this.abortWith(new LockLostError(this.key));
    }

    abortWith(reason) {
      if (this.abortReason !== undefined) return;
      this.abortReason = reason;
      this.controller?.abort(reason);
    }

    settled(fx) {
      if (!this.running) {
        this.host.execs.delete(this.id);
        this.detachCaller();
        if (fx.code === 'LOCK_NOT_ACQUIRED') return this.resolve(undefined);
        return this.reject(errorOf(fx, this.host, this.callerSignal, this.causes));
      }
      this.host.execs.delete(this.id);
      // Lost or lapsed before release() was called: the engine wound the lease down on
      // its own.
      if (this.released === undefined) this.over();
      // The store failed to release: release() rejects with it (a loss answers false).
      else if (fx.outcome === 'error' && fx.code === 'LOCK_STORE_FAILED') {
        this.released.reject(errorOf(fx, this.host, this.callerSignal, this.causes));
      } else this.released.resolve(fx.outcome === 'value');
    }

    /** The lease is over without a release() of its holder: release() and extend() answer false from now on. */
    over() {
      this.released ??= { promise: Promise.resolve(false), resolve() {}, reject() {} };
    }

    release() {
      // Released (or asked to be) already: false, whatever the first release() answers.
      if (this.released) return this.released.promise.then(falsy, falsy);
      let resolve;
      let reject;
      const promise = new Promise((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.released = { promise, resolve, reject };
      const host = this.host;
      let status;
      try {
        status = host.call(() => host.engine.finish(this.id, true, false));
      } catch (error) {
        host.execs.delete(this.id);
        return Promise.reject(error);
      }
      if (status === FINISHED_VALUE) {
        host.execs.delete(this.id);
        resolve(true);
      } else if (status === FINISHED_NOT_HELD) {
        host.execs.delete(this.id);
        resolve(false);
      }
      return promise;
    }

    extend(ttl) {
      return new Promise((resolve) => {
        let ttlMs;
        if (ttl !== undefined) {
          ttlMs = checkDuration(ttl, 'ttl', { infiniteOk: false });
          if (ttlMs <= 0) throw new RangeError(`ttl must be positive, got ${describe(ttl)}`);
        }
        if (this.released) return resolve(false);
        const host = this.host;
        // Waiting before the call: the answer may come inside it (a store that throws
        // synchronously is answered while the engine call is still draining).
        this.extends.push(resolve);
        const status = host.call(() => host.engine.extend(this.id, ttlMs));
        if (status === EXTENDED || status === NOT_EXTENDED) {
          this.extends.splice(this.extends.indexOf(resolve), 1);
          resolve(status === EXTENDED);
        }
      });
    }

    extended(ok) {
      this.extends.shift()?.(ok);
    }

    keepCause(request, error) {
      (this.causes ??= new Map()).set(request, error);
    }

    fail(error) {
      this.detachCaller();
      if (!this.running) this.reject(error);
      else this.released?.resolve(false);
      this.over();
      for (const resolve of this.extends.splice(0)) resolve(false);
    }

    /**
     * The engine was retired (`die`): an auto-renewed lease held by hand is renewed no
     * more, so it is lost. A lease without renewals stands until its ttl, as before.
     */
    retire(failure) {
      if (this.running && this.autoRenew && !this.released) this.abortWith(unrenewed(this.key, failure));
      this.fail(failure);
    }

    event() {}
  }
  LeaseExecution.prototype.keepLockText = keepLockText;

  function checkStore(store) {
    const methods = ['acquire', 'renew', 'release'];
    if (store === null || typeof store !== 'object' || methods.some((m) => typeof store[m] !== 'function')) {
      throw new TypeError(`store must be a LockStore with acquire, renew and release methods, got ${describe(store)}`);
    }
  }

  /**
   * Acquires a lease by hand. Resolves to a handle, or `undefined` when the key stays held
   * past `wait`. Rejects with a `LockStoreError` when the store fails, or the abort reason.
   */
  function acquireLock(store, key, ttl, options = {}) {
    return nested(() => acquireLockNow(store, key, ttl, options));
  }

  function acquireLockNow(store, key, ttl, options) {
    return new Promise((resolve, reject) => {
      checkStore(store);
      checkKey(key);
      const ttlMs = checkDuration(ttl, 'ttl', { infiniteOk: false });
      if (ttlMs <= 0) throw new RangeError(`ttl must be positive, got ${describe(ttl)}`);
      if (options === null || typeof options !== 'object') {
        throw new TypeError(`options must be an object, got ${describe(options)}`);
      }
      checkOptionNames(options, ACQUIRE_LOCK_OPTIONS, 'acquireLock');
      const { wait = 0, signal, autoRenew = false, timeProvider } = options;
      const waitMs = checkDuration(wait, 'wait', { infiniteOk: true });
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new TypeError(`signal must be an AbortSignal, got ${describe(signal)}`);
      }
      if (typeof autoRenew !== 'boolean') throw new TypeError(`autoRenew must be a boolean, got ${describe(autoRenew)}`);
      const memory = store instanceof MemoryLockStore;
      const host = memory ? store[HOST] : hostOf(timeProvider, 'timeProvider');
      // A memory store's leases run on its own clock: another one here would be ignored.
      if (memory && timeProvider !== undefined && hostOf(timeProvider, 'timeProvider') !== host) {
        throw new TypeError("timeProvider must be the MemoryLockStore's own time provider (or left out): its leases run on the store's clock");
      }
      refuseMemoryWait(waitMs, store, host);
      if (host.dead) throw host.dead;
      if (signal?.aborted) throw signal.reason;
      const { kind, id: storeId } = host.registerStore(store);
      const id = host.newExecId();
      const rec = new LeaseExecution(host, id, key, signal, autoRenew);
      rec.store = store; // held while the lease lives: the host holds stores weakly
      rec.resolve = resolve;
      rec.reject = reject;
      if (signal) {
        rec.onCallerAbort = () => host.call(() => host.engine.cancel(id));
        signal.addEventListener('abort', rec.onCallerAbort, { once: true });
      }
      host.execs.set(id, rec);
      let status;
      try {
        const bits = autoRenew ? OPTION_MANUAL | OPTION_RENEW : OPTION_MANUAL;
        status = host.engine.start(id, bits, kind, storeId, key, ttlMs, waitMs);
      } catch (error) {
        host.execs.delete(id);
        rec.detachCaller();
        throw fromEngine(error);
      }
      if (host.status(statusOf(status)) === STARTED_RUNNING) rec.run();
    });
  }

  /**
   * Runs `fn` under one lock: `withLock(key, fn, options)`. Called without a function —
   * `withLock(key, options)` or `withLock(options)` — it is a method decorator (standard
   * decorators) that runs each call of the method under the lock.
   *
   * Unlike `addLock`, a held key is waited for: `wait` defaults to the lock's ttl, longer
   * than a lease left behind by a crashed holder can last. With `skipOnLockFailure` it
   * defaults to 0, and a key still held resolves `undefined` instead of rejecting.
   */
  function withLock(keyOrOptions, fnOrOptions, maybeOptions) {
    if (typeof fnOrOptions === 'function') {
      try {
        // `withLock(key, fn, options?)`, or `withLock(options, fn)` with the key in them.
        const locked = lockedRunner(keyOrOptions, maybeOptions);
        if (!isKey(keyOrOptions) && maybeOptions !== undefined) {
          throw new TypeError('withLock(options, fn) takes no third argument: put every option in the first');
        }
        return locked.run(fnOrOptions);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    // `withLock(key, options)` or `withLock(options)`: its signal and operationKey apply
    // to every call, as the function form's do to its one.
    const locked = lockedRunner(keyOrOptions, fnOrOptions);
    return function lockedMethod(method, context) {
      if (typeof method !== 'function' || context?.kind !== 'method') {
        throw new TypeError('withLock(...) decorates methods only');
      }
      return function (...args) {
        return locked.run(() => method.apply(this, args));
      };
    };
  }

  /** withLock's first argument is its key (not its options). */
  const isKey = (value) => typeof value === 'string' || typeof value === 'function';

  /** The pipeline of one withLock call or decorated method, and how it runs a function. */
  function lockedRunner(keyOrOptions, options) {
    let lockOptions = options;
    if (isKey(keyOrOptions)) {
      if (options !== undefined && (options === null || typeof options !== 'object')) {
        throw new TypeError(`withLock options must be an object, got ${describe(options)}`);
      }
      if (options?.key !== undefined) {
        throw new TypeError('withLock was given a key twice: as its first argument and as options.key');
      }
      lockOptions = { ...options, key: keyOrOptions };
    } else {
      lockOptions = keyOrOptions;
    }
    if (lockOptions === null || typeof lockOptions !== 'object') {
      throw new TypeError(`withLock takes a key (a string or a function) or lock options first, got ${describe(lockOptions)}`);
    }
    checkOptionNames(lockOptions, WITH_LOCK_OPTIONS, 'withLock');
    if (lockOptions.key === undefined && lockOptions.operationKey === undefined) {
      throw new TypeError("withLock needs a key: withLock('key', fn), withLock({ key }, fn), or { operationKey }");
    }
    const { timeProvider, telemetry, signal, operationKey, skipOnLockFailure = false, ...lock } = lockOptions;
    if (typeof skipOnLockFailure !== 'boolean') {
      throw new TypeError(`skipOnLockFailure must be a boolean, got ${describe(skipOnLockFailure)}`);
    }
    // A MemoryLockStore's leases run on its clock: without a timeProvider, so does the lock.
    const clock = timeProvider === undefined && lock.store instanceof MemoryLockStore ? lock.store[TIME_PROVIDER] : timeProvider;
    // Where the runtime cannot wait on the in-process store (workerd), withLock fails fast
    // there by default rather than refusing every call.
    const cannotWait =
      memoryWaitRefused !== undefined && clock === undefined && (lock.store === undefined || lock.store instanceof MemoryLockStore);
    if (lock.wait === undefined) lock.wait = skipOnLockFailure || cannotWait ? 0 : (lock.ttl ?? DEFAULT_TTL);
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry }).addLock(lock).build();
    // Built for one call (the helper) or one method: not worth a defined lock each time.
    pipeline.definedLock = -1;
    const execute = signal === undefined && operationKey === undefined ? undefined : { signal, operationKey };
    return {
      run(callback) {
        if (!skipOnLockFailure) return pipeline.execute(callback, execute);
        // Only this lock's own rejection is skipped: one from inside the callback (a nested lock
        // that failed) is the caller's to see.
        let started = false;
        return pipeline
          .execute((context) => {
            started = true;
            return callback(context);
          }, execute)
          .catch((error) => {
            if (!started && isRejection(error)) return undefined;
            throw error;
          });
      },
    };
  }

  /** The fencing token of the innermost lock the code runs under; undefined outside any lock. */
  function getLockToken(context) {
    if (context !== undefined) {
      if (context instanceof ResilienceContext) return context._rec?.finished ? undefined : context._token;
      if (context === null || typeof context !== 'object' || !(context.properties instanceof Map)) {
        throw new TypeError(`context must be an execution context, got ${describe(context)}`);
      }
      return context.properties.get(LOCK_TOKEN);
    }
    // Work started under a lock can run after its execution settled and released the
    // lock (a timer, a detached promise): it runs under the enclosing lock still held,
    // if it was started in a nested one, else under none.
    return liveContext(ambient ? (ambient.getStore() ?? syncContext) : syncContext)?._token;
  }

  /** `context`, or the nearest context enclosing it whose callback still runs; undefined when none does. */
  function liveContext(context) {
    while (context !== undefined && context._rec?.finished) context = context._outer;
    return context;
  }

  const api = {
    engine: engineName,
    // Why Node/Bun run wasm instead of the native addon; undefined when nothing fell back.
    engineFallbackReason: options.engineFallbackReason,
    ResiliencePipelineBuilder,
    ResiliencePipeline,
    MemoryLockStore,
    FakeTimeProvider,
    LockNotAcquiredError,
    LockLostError,
    LockStoreError,
    isRejection,
    getLockToken,
    LOCK_TOKEN,
    acquireLock,
    withLock,
  };
  // For the project's own tests (forcing a panic, reading engine counters); not an API.
  Object.defineProperty(api, Symbol.for('leasehold.internals'), {
    value: {
      binding,
      hostOf: (timeProvider) => hostOf(timeProvider, 'timeProvider'),
      call: (fn) => {
        try {
          return fn();
        } catch (error) {
          throw fromEngine(error);
        }
      },
    },
  });
  return api;
}

module.exports = { createApi };
