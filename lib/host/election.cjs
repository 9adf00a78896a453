'use strict';
// Leader election on a lease: `campaign` waits in line for a key's lease and holds it as a
// leadership whose term is the lease's fencing token; `lead` runs a callback for each term
// it wins, until its own signal aborts.
//
// What must hold: a leadership's signal is aborted no later than the moment its lease may
// have ended, as this process can bound it. The lease is confirmed by `extend()` every
// ttl/3 (the engine's renewal period), and a confirmation sent at t proves the lease until
// t + ttl at least (the store starts the ttl when the call reaches it). Past that bound the
// signal reads aborted even before any timer has run: a process resumed from a pause
// that ran past its ttl sees itself deposed before it acts on a tick.

const { LockLostError, LockStoreError } = require('./errors.cjs');
const { describe, checkOptionNames } = require('../common/describe.cjs');
const { checkKey, checkStore, DEFAULT_TTL } = require('./options.cjs');
const { TIME_PROVIDER } = require('./symbols.cjs');
const { checkName } = require('./election-names.cjs');

const CAMPAIGN_OPTIONS = ['store', 'ttl', 'name', 'signal'];
const LEAD_OPTIONS = [...CAMPAIGN_OPTIONS, 'onError'];
// Confirmations per ttl: as the engine renews (core/src/polling.rs, `renew_after`).
const RENEWALS_PER_TTL = 3;
// lead() campaigns again after a store failure or a callback's error after a pause that
// doubles from the first to the last, so that a failing candidate does not spin.
const FIRST_PAUSE_MS = 50;
const LAST_PAUSE_MS = 1000;

const monotonicNow = () => performance.now();
const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;
const reasonOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'reason').get;

function resignedReason(key) {
  const message = `the leadership of '${key}' was resigned`;
  if (typeof DOMException === 'function') return new DOMException(message, 'AbortError');
  const error = new Error(message);
  error.name = 'AbortError';
  return error;
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * `campaign` and `lead` of one API. `api` is its shared context (lib/host/api.cjs);
 * `acquire` is the API's exported `acquireLock` (which waits for a lazily loaded engine);
 * `names` its CandidateNames.
 */
function defineElection(api, acquire, names) {
  const { checkTtl, MemoryLockStore } = api;

  /** What `campaign` and `lead` were given, checked; throws TypeError/RangeError. */
  function checkCampaign(key, options, what, known) {
    checkKey(key);
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { store, ttl }, got ${describe(options)}`);
    }
    checkOptionNames(options, known, what);
    const { store, ttl = DEFAULT_TTL, name, signal } = options;
    checkStore(store);
    if (store instanceof MemoryLockStore && store[TIME_PROVIDER] !== undefined) {
      throw new TypeError(`${what} runs on the system clock: a MemoryLockStore on a FakeTimeProvider cannot hold an election`);
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(`signal must be an AbortSignal, got ${describe(signal)}`);
    }
    return { store, ttlMs: checkTtl(ttl), name: checkName(name), signal };
  }

  /** One term of office: the lease on `key`, held until resigned, lost or aborted. */
  class Leadership {
    #lease;
    #store;
    #ttlMs;
    #controller = new AbortController();
    #validUntil;
    #renewTimer;
    #deadlineTimer;
    #callerSignal;
    #onCallerAbort;
    #released;

    constructor(store, lease, name, ttlMs, confirmedAt, callerSignal) {
      this.key = lease.key;
      this.term = lease.fencingToken;
      this.name = name;
      this.owner = lease.owner;
      this.#lease = lease;
      this.#store = store;
      this.#ttlMs = ttlMs;
      this.#validUntil = confirmedAt + ttlMs;
      this.#callerSignal = callerSignal;
      const signal = this.#controller.signal;
      // Read as aborted from the moment the lease may have ended, whether or not a timer
      // has run since (timers run in due order after a pause, the caller's may be first).
      const check = () => this.#expireIfDue();
      Object.defineProperties(signal, {
        aborted: { get: () => (check(), abortedOf.call(signal)), configurable: true },
        reason: { get: () => (check(), reasonOf.call(signal)), configurable: true },
        throwIfAborted: { value: () => (check(), AbortSignal.prototype.throwIfAborted.call(signal)), configurable: true },
      });
      if (callerSignal) {
        this.#onCallerAbort = () => this.#end(callerSignal.reason);
        callerSignal.addEventListener('abort', this.#onCallerAbort, { once: true });
      }
      if (store instanceof MemoryLockStore) names.setMemoryLeader(store, this.key, this.owner, name);
      this.#armDeadline();
      this.#scheduleRenewal(confirmedAt);
      names.changed(store, this.key);
    }

    /** Aborts when the leadership ends: lost (LockLostError), resigned, or the campaign's signal aborted (its reason). */
    get signal() {
      return this.#controller.signal;
    }

    /**
     * Steps down at once: aborts `signal`, then releases the lease, so that the next
     * candidate takes over without waiting for the ttl. Resolves true if the lease was
     * still this leader's; false once it was lost, or on a second call.
     */
    resign() {
      if (this.#released !== undefined) return this.#released.then(() => false);
      this.#end(resignedReason(this.key));
      return this.#released;
    }

    #expireIfDue() {
      if (this.#released === undefined && monotonicNow() >= this.#validUntil) {
        this.#end(new LockLostError(this.key, `the lease on '${this.key}' ran out before it was renewed: no longer the leader`));
      }
    }

    #armDeadline() {
      clearTimeout(this.#deadlineTimer);
      const wait = Math.max(0, this.#validUntil - monotonicNow());
      this.#deadlineTimer = setTimeout(() => this.#expireIfDue(), Math.ceil(wait));
    }

    #scheduleRenewal(from) {
      const due = from + this.#ttlMs / RENEWALS_PER_TTL;
      this.#renewTimer = setTimeout(() => this.#renew(), Math.max(0, Math.ceil(due - monotonicNow())));
    }

    async #renew() {
      this.#expireIfDue();
      if (this.#released !== undefined) return;
      const sent = monotonicNow();
      let ok = false;
      try {
        ok = await this.#lease.extend();
      } catch {
        ok = false;
      }
      if (this.#released !== undefined) return;
      if (!ok) {
        this.#end(new LockLostError(this.key, `the lease on '${this.key}' could not be renewed: no longer the leader`));
        return;
      }
      this.#validUntil = sent + this.#ttlMs;
      this.#expireIfDue();
      if (this.#released !== undefined) return;
      this.#armDeadline();
      this.#scheduleRenewal(sent);
    }

    /** Ends the leadership with `reason` (once): the signal first, then the lease. */
    #end(reason) {
      if (this.#released !== undefined) return;
      clearTimeout(this.#renewTimer);
      clearTimeout(this.#deadlineTimer);
      this.#callerSignal?.removeEventListener('abort', this.#onCallerAbort);
      // Set before aborting: abort listeners that call resign() get this same answer.
      const released = this.#lease.release();
      this.#released = released.then(
        (held) => held && !(reason instanceof LockLostError),
        () => false,
      );
      this.#controller.abort(reason);
      const store = this.#store;
      if (store instanceof MemoryLockStore) names.setMemoryLeader(store, this.key, undefined);
      // Watchers here look again once the store has been told.
      released.then(
        () => names.changed(store, this.key),
        () => names.changed(store, this.key),
      );
    }
  }

  /**
   * Waits in line for `key` until this process leads; resolves the Leadership. Rejects
   * with the campaign signal's reason when it aborts first (leaving the line), with a
   * LockStoreError when the store fails, with a TypeError/RangeError for bad arguments.
   */
  async function campaign(key, options) {
    const { store, ttlMs, name, signal } = checkCampaign(key, options, 'campaign', CAMPAIGN_OPTIONS);
    const through = names.storeFor(store, name);
    for (;;) {
      signal?.throwIfAborted();
      const lease = await acquire(through, key, ttlMs, { wait: Infinity, signal });
      if (lease === undefined) continue;
      // The grant may be older than this process can tell: a confirmation bounds it.
      const sent = monotonicNow();
      let confirmed = false;
      try {
        confirmed = await lease.extend();
      } catch {
        confirmed = false;
      }
      if (signal?.aborted) {
        await lease.release().catch(() => false);
        throw signal.reason;
      }
      if (confirmed && monotonicNow() < sent + ttlMs) return new Leadership(store, lease, name, ttlMs, sent, signal);
      // Lost as soon as won (a store that lost its data, a pause): back in line.
      await lease.release().catch(() => false);
    }
  }

  /**
   * Campaigns for `key`, runs `fn(leadership)` for each term won, and campaigns again
   * after it, until `options.signal` aborts; then resolves undefined. A term ends when
   * `fn` settles (the lease is released at once) or the leadership is lost. What `fn`
   * throws while still leading steps down and is passed to `onError(error, leadership)`,
   * or, without `onError`, rejects lead() after the lease is released; what it throws
   * once its leadership's signal has aborted is its way of stopping, and is dropped.
   */
  async function lead(key, fn, options) {
    if (typeof fn !== 'function') throw new TypeError(`fn must be a function, got ${describe(fn)}`);
    const { store, ttlMs, name, signal } = checkCampaign(key, options, 'lead', LEAD_OPTIONS);
    const { onError } = options;
    if (onError !== undefined && typeof onError !== 'function') {
      throw new TypeError(`onError must be a function, got ${describe(onError)}`);
    }
    let wait = 0;
    const backOff = () => {
      wait = Math.min(LAST_PAUSE_MS, Math.max(FIRST_PAUSE_MS, wait * 2));
      return pause(wait, signal);
    };
    while (!signal?.aborted) {
      let leadership;
      try {
        leadership = await campaign(key, { store, ttl: ttlMs, name, signal });
      } catch (error) {
        if (signal?.aborted) break;
        if (!(error instanceof LockStoreError)) throw error;
        await backOff();
        continue;
      }
      let failed = false;
      let failure;
      try {
        await fn(leadership);
      } catch (error) {
        if (!leadership.signal.aborted) {
          failed = true;
          failure = error;
        }
      }
      await leadership.resign();
      if (!failed) {
        wait = 0;
        continue;
      }
      if (onError === undefined) throw failure;
      onError(failure, leadership);
      await backOff();
    }
  }

  return { campaign, lead, Leadership };
}

module.exports = { defineElection };
