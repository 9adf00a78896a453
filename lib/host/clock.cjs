'use strict';
// Time sources: the system clock's engine host, made on first use, and FakeTimeProvider,
// a clock that moves only when told to, each with an engine host of its own.

const { describe } = require('../common/describe.cjs');
const { HOST } = require('./symbols.cjs');

// A fraction within a nanosecond of the next millisecond is float error, not time:
// 3 × (1000 / 3) adds up to 999.99999999999994.
const NANOSECOND = 1e-6;

/** `ms` as whole milliseconds, which is all the engine counts, and the fraction left over. */
function splitMillis(ms) {
  const whole = Math.floor(ms);
  if (ms - whole > 1 - NANOSECOND) return { whole: whole + 1, fraction: 0 };
  return { whole, fraction: ms - whole };
}

/** The time source classes of one API; `api` is its shared context (lib/host/api.cjs). */
function defineClocks(api) {
  const { EngineHost } = api;
  // The system clock's host, created on first use.
  const systemHost = { instance: undefined };

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
      // Queues on the fast path whose deadline falls on the way go to the engine first,
      // which times their waiters out at their own instants.
      host.fast.expireBy(now + whole);
      host.fakeNow = now + whole;
      host.call(() => host.engine.advance(whole));
      this.#fraction = fraction;
    }
  }

  function systemEngineHost() {
    if (!systemHost.instance) systemHost.instance = new EngineHost(false, 0);
    return systemHost.instance;
  }

  function hostOf(timeProvider, arg) {
    if (timeProvider === undefined) return systemEngineHost();
    if (timeProvider instanceof FakeTimeProvider) return timeProvider[HOST];
    throw new TypeError(`${arg} must be a FakeTimeProvider or undefined (the system clock), got ${describe(timeProvider)}`);
  }

  return { FakeTimeProvider, systemHost, hostOf };
}

module.exports = { defineClocks };
