'use strict';
// The host of one engine (one time source): it carries out what the engine asks. It
// applies the effects the engine returns (lib/host/protocol.cjs decodes them), keeps the
// engine's one timer, and, when the engine fails where no caller can be told, retires
// it; calling JS stores and handing their answers back is store-calls.cjs, the class it
// extends. It decides nothing itself.

const {
  STATUS_EFFECTS,
  STATUS_TIMER_REF,
  STATUS_TIMER_UNREF,
  STATUS_TIMER_ARM,
  STATUS_HOST_BITS,
  resultOf,
  EFFECT_WIDTH,
  EFFECT_FIRST,
  stringCount,
  decodeEffect,
} = require('./protocol.cjs');
const { HOST } = require('./symbols.cjs');
const { Watchers } = require('./watchers.cjs');
const { FastPath } = require('./fast-path.cjs');
const { defineStoreCalls } = require('./store-calls.cjs');

const MAX_TIMER_MS = 2 ** 31 - 1;
const NO_STRINGS = [];

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

function randomSeed() {
  const seed = new Uint8Array(32);
  globalThis.crypto.getRandomValues(seed);
  return seed;
}

/**
 * The EngineHost class of one API. `api` is the API's shared context (lib/host/api.cjs):
 * `binding`, `fromEngine`, and the classes read when first needed (`MemoryLockStore`,
 * `Execution`).
 */
function defineEngineHost(api) {
  const { binding, fromEngine } = api;

  // Calling JS stores and checking their answers is the other half (store-calls.cjs).
  class EngineHost extends defineStoreCalls(api) {
    constructor(fake, start) {
      super();
      this.startAt = start;
      this.fake = fake;
      // A fake clock's time, which only FakeTimeProvider#advance moves (read by the fast path).
      this.fakeNow = start;
      this.fast = new FastPath(this);
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
      this.watchers = new Watchers(this);
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
        if (api.ownerPrefix !== '') engine.setOwnerPrefix(api.ownerPrefix);
      } catch (error) {
        throw fromEngine(error);
      }
      Object.defineProperty(this, 'engine', { value: engine, writable: true, configurable: true });
      return engine;
    }

    get defaultStore() {
      if (!this.defaultStoreInstance) this.defaultStoreInstance = api.MemoryLockStore[HOST](this, 0);
      return this.defaultStoreInstance;
    }

    newExecId() {
      // Below 2^31: the engine numbers its own executions (parked leases) above.
      do {
        this.nextExec = (this.nextExec + 1) % 0x80000000;
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
        // At once (the next execution refs it again): deferring it to the end of the
        // turn would add a turn of the event loop to every execution on a JS store.
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
      this.fast.retire(failure);
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
        // Its token is in the shared words: no call asks for it.
        rec.run(this.fast.handoffToken());
      } catch (error) {
        // The previous holder is settled already: a failure here is this execution's
        // (its lock is released through `finish` once its callback could have run).
        if (rec instanceof api.Execution && rec.running) rec.finish(false, error);
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
          // Flat effects (lib/host/protocol.cjs); text only when the header says there is some.
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
      fx.layer = layer;
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
      return this.watchers.apply(fx);
    }

    eventEffect(exec, fx) {
      const rec = this.execs.get(exec);
      if (!rec) return undefined;
      return rec.event(fx, fx.cause ? this.thrown.get(fx.cause) : undefined);
    }
  }
  return EngineHost;
}

module.exports = { defineEngineHost };
