// The contract model's world: carries out one plan (plan.mjs) against leasehold, every
// way in, and checks online (checks.mjs) what the README promises: one holder per key,
// tokens rising per key, the caller's own token, no callback inside execute(), FIFO on
// the memory store, every promise settling with its documented result, telemetry telling
// a loss before the next holder, nothing left behind. Throws a Violation.

import {
  FakeTimeProvider,
  LOCK_TOKEN,
  LockLostError,
  LockNotAcquiredError,
  LockStoreError,
  MemoryLockStore,
  ResiliencePipelineBuilder,
  acquireLock,
  getLockToken,
  withLock,
} from '../support/leasehold.mjs';
import { grantingStore, recordingStore } from '../support/stores.mjs';
import { handoffStore } from '../support/handoff-store.mjs';
import { deferred, flush } from '../support/time.mjs';
import { Checker, Violation } from './checks.mjs';
import { KEYS } from './plan.mjs';

const SINGLE = new Set(['fixed', 'opkey', 'fn', 'withLock', 'acquire']);

function clockOf(kind) {
  if (kind === 'fake') {
    const clock = new FakeTimeProvider();
    const timers = [];
    const now = () => clock.now();
    return {
      fake: true,
      clock,
      now,
      sleepFor: (ms) => new Promise((resolve) => timers.push({ at: now() + ms, resolve })),
      blocks: 0,
      block(ms) {
        this.blocks += 1;
        clock.advance(ms);
      },
      async pass(ms) {
        for (let left = ms; ; left -= 5) {
          if (left > 0) clock.advance(Math.min(5, left));
          for (const t of timers.filter((t) => t.at <= now())) {
            timers.splice(timers.indexOf(t), 1);
            t.resolve();
          }
          await flush(3);
          if (left <= 5) return;
        }
      },
    };
  }
  const now = () => performance.now();
  return {
    fake: false,
    clock: undefined,
    now,
    sleepFor: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    blocks: 0,
    block(ms) {
      this.blocks += 1;
      const until = now() + ms;
      while (now() < until);
    },
    pass: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  };
}

function storeOf(kind, time) {
  const clock = time.fake ? time.clock : { now: time.now };
  switch (kind) {
    case 'memory':
      return new MemoryLockStore({ timeProvider: time.clock });
    case 'poll':
      return recordingStore(clock);
    case 'announce':
      return handoffStore(clock, { turn: undefined, announce: true });
    case 'grants':
      return grantingStore(clock, { deliver: 'microtask' });
    default:
      return handoffStore(clock, { turn: 20 });
  }
}

/**
 * A JS store's try left unanswered for its ttl (the loop was blocked, or time moved on):
 * documented as a LockStoreError, and the callback never runs.
 */
function unanswered(error) {
  return error instanceof LockStoreError && /did not answer/.test(error.message);
}

/** Carries out `plan`; resolves when every request settled and every check held. */
export async function runPlan(plan) {
  const time = clockOf(plan.clock);
  const store = storeOf(plan.store, time);
  const checker = new Checker(time.now);
  const fail = (message) => checker.fail(message);
  const timeProvider = time.clock;
  const requests = [];
  let inside = false;

  // A JS store answers from a promise job: on fake time, a lease of a few ms would lapse
  // between two steps of the clock before its answer is read.
  const ttlFor = (ms) => (plan.store !== 'memory' && time.fake ? Math.max(ms, 20) : ms);

  function newRequest(op, way, key) {
    const ttl = ttlFor(op.ttl);
    const r = { name: `r${requests.length}`, way, key, op, ttl, started: false, settled: false, holds: [] };
    r.controller = new AbortController();
    requests.push(r);
    return r;
  }

  /** The callback of request `r`, holding `keys` (innermost last) once it starts. */
  function callbackOf(r, keys, inner) {
    return (context) => {
      if (inside) fail(`${r.name}'s callback started inside the call that started it`);
      if (r.abortedBeforeStart) fail(`${r.name}'s callback started although its caller aborted first`);
      r.started = true;
      const token = context.properties.get(LOCK_TOKEN);
      if (getLockToken() !== token || getLockToken(context) !== token) {
        fail(`${r.name} reads token ${getLockToken()} ambiently, ${token} from its context`);
      }
      const signal = context.signal;
      const onAbort = () => {
        if (signal.reason instanceof LockLostError) r.lost = true;
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort);
      keys.forEach((key, i) => r.holds.push(checker.hold(r, key, i === keys.length - 1 ? token : undefined)));
      const value = `value of ${r.name}`;
      const end = (ok, outcome) => {
        for (const hold of r.holds) hold.ended = true;
        r.callback = { ok, outcome };
        if (ok) return outcome;
        throw outcome;
      };
      const after = async (promise) => {
        try {
          await promise;
        } catch (error) {
          return end(false, error);
        }
        if (getLockToken() !== token) fail(`${r.name} reads token ${getLockToken()} after an await, not ${token}`);
        return end(true, value);
      };
      switch (r.op.work) {
        case 'throw':
          return end(false, new Error(`thrown by ${r.name}`));
        case 'block':
          time.block(r.op.ms);
          return end(true, value);
        case 'never':
          r.never = deferred();
          return after(r.never.promise);
        case 'ms': {
          const aborted = new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
          aborted.catch(() => {});
          return after(Promise.race([time.sleepFor(r.op.ms), aborted]));
        }
        default:
          if (inner) return after(inner());
          return end(true, value);
      }
    };
  }

  function builder(r) {
    const telemetry = r.op.telemetry ? (event) => checker.event(r, event) : undefined;
    return new ResiliencePipelineBuilder({ timeProvider, telemetry });
  }

  function lockOf(r, key, wait) {
    // A loss after the caller aborted leaves the signal's first reason: onLockLost tells.
    const onLockLost = () => {
      r.lost = true;
    };
    const lock = { store, ttl: r.ttl, wait, key, onLockLost };
    if (plan.store === 'handoff' && r.op.linger > 0) lock.linger = r.op.linger;
    return lock;
  }

  /** Starts request `r` by its way in; its promise. */
  function launch(r) {
    const { op } = r;
    const signal = r.controller.signal;
    const key = KEYS[op.key];
    const other = KEYS[(op.key + 1) % KEYS.length];
    const innerWait = op.wait === Infinity ? 100 : Math.min(op.wait, 100);
    switch (r.way) {
      case 'fixed':
        return builder(r).addLock(lockOf(r, key, op.wait)).build().execute(callbackOf(r, [key]), { signal });
      case 'opkey': {
        const { key: _, ...lock } = lockOf(r, key, op.wait);
        return builder(r).addLock(lock).build().execute(callbackOf(r, [key]), { signal, operationKey: key });
      }
      case 'fn':
        return builder(r)
          .addLock({ ...lockOf(r, key, op.wait), key: (context) => context.operationKey.slice(0, 1) })
          .build()
          .execute(callbackOf(r, [key]), { signal, operationKey: `${key}:${r.name}` });
      case 'withLock': {
        const { key: _, ...lock } = lockOf(r, key, op.wait);
        const telemetry = op.telemetry ? (event) => checker.event(r, event) : undefined;
        return withLock(key, callbackOf(r, [key]), { ...lock, timeProvider, telemetry, signal });
      }
      case 'twoLock':
        return builder(r)
          .addLock(lockOf(r, key, op.wait))
          .addLock(lockOf(r, other, innerWait))
          .build()
          .execute(callbackOf(r, [key, other]), { signal });
      case 'nested': {
        // The inner request starts inside the outer callback, on another key, and waits
        // at most 100 ms: two nested requests in opposite orders never wait forever.
        const inner = () => {
          const work = op.work === 'never' ? 'sync' : op.work;
          const innerOp = { ...op, key: (op.key + 1) % KEYS.length, wait: innerWait, abortBefore: false, work };
          const ir = newRequest(innerOp, 'fixed', other);
          return start(ir).then(() => (ir.ok ? undefined : Promise.reject(ir.outcome)));
        };
        return builder(r)
          .addLock(lockOf(r, key, op.wait))
          .build()
          .execute(callbackOf(r, [key], inner), { signal });
      }
      default:
        return acquireLock(store, key, r.ttl, { wait: op.wait, signal, autoRenew: op.autoRenew, timeProvider });
    }
  }

  function start(r) {
    const { op } = r;
    if (op.abortBefore) abort(r);
    r.deadline = op.wait === Infinity ? undefined : time.now() + op.wait;
    r.calledAt = time.now();
    if (plan.store === 'memory' && SINGLE.has(r.way) && !op.abortBefore) checker.arrived(r, r.key);
    let promise;
    inside = true;
    try {
      promise = launch(r);
    } catch (error) {
      promise = Promise.reject(error);
    } finally {
      inside = false;
    }
    // A violation found as it settles is kept by the checker; this promise never rejects.
    const settle = (ok, outcome) => {
      try {
        settled(r, ok, outcome);
      } catch {}
    };
    r.promise = promise.then(
      (value) => settle(true, value),
      (error) => settle(false, error),
    );
    return r.promise;
  }

  function abort(r) {
    r.aborted = true;
    r.reason = new Error(`${r.name} aborted by its caller`);
    if (!r.started) r.abortedBeforeStart = true;
    r.controller.abort(r.reason);
  }

  function settled(r, ok, outcome) {
    if (r.settled) fail(`${r.name} settled twice`);
    r.settled = true;
    r.ok = ok;
    r.outcome = outcome;
    checker.left(r, r.key);
    const shown = ok ? `value ${String(outcome)}` : `${outcome?.name}: ${outcome?.message}`;
    const wrong = (why) => fail(`${r.name} (${r.way}, wait ${r.op.wait}) settled with ${shown}: ${why}`);
    if (r.abortedBeforeStart) {
      if (ok && r.way === 'acquire' && outcome === undefined) return wrong('aborted first, so its abort reason');
      if (ok || outcome !== r.reason) return wrong('aborted before it started: its own abort reason');
      return undefined;
    }
    if (r.way === 'acquire') return leaseSettled(r, ok, outcome, wrong);
    if (!r.started) {
      if (ok) return wrong('its callback never ran');
      if (outcome instanceof LockNotAcquiredError) {
        if (r.op.wait === Infinity && SINGLE.has(r.way)) return wrong('wait: Infinity waits as long as it takes');
        return undefined;
      }
      if (outcome instanceof LockLostError && r.way === 'twoLock' && /before the callback started/.test(outcome.message)) return undefined;
      if (unanswered(outcome)) return undefined;
      return wrong('a callback that never ran settles with LockNotAcquiredError or its abort reason');
    }
    const cb = r.callback;
    if (cb === undefined) return wrong('settled before its callback did');
    if (cb.ok && !(ok && outcome === cb.outcome)) return wrong(`its callback returned ${cb.outcome}`);
    if (!cb.ok && !(outcome === cb.outcome || (outcome instanceof LockLostError && outcome.cause === cb.outcome))) {
      return wrong(`its callback threw ${cb.outcome?.message}`);
    }
    return undefined;
  }

  function leaseSettled(r, ok, handle, wrong) {
    if (!ok && unanswered(handle)) return undefined;
    if (!ok) return wrong('a lease rejects only with its abort reason here');
    if (handle === undefined) {
      if (r.op.wait === Infinity) return wrong("undefined means the key stayed held past wait, and wait is Infinity");
      return undefined;
    }
    r.started = true;
    r.handle = handle;
    const over = handle.signal.aborted;
    const until = over ? time.now() : r.op.autoRenew ? undefined : r.calledAt + r.ttl - (time.fake ? 0 : 5);
    r.holds.push(checker.hold(r, r.key, handle.fencingToken, until));
    const onAbort = () => {
      r.lost = true;
      if (!(handle.signal.reason instanceof LockLostError)) wrong('a lease signal aborts only with LockLostError');
    };
    if (over) onAbort();
    else handle.signal.addEventListener('abort', onAbort);
    return undefined;
  }

  function leaseStep(op) {
    const open = requests.filter((r) => r.handle && !r.releasing);
    const r = open[op.nth % Math.max(open.length, 1)];
    if (!r) return;
    const hold = r.holds[0];
    // Held by what its holder knows, on fake time, with no callback blocking the loop
    // before the answer comes (which may come after the lease ran out, and answer false).
    const blocks = time.blocks;
    const inTime = () =>
      time.fake && time.blocks === blocks && !r.lost && (hold.until === undefined || time.now() < hold.until);
    const wasLive = checker.isLive(hold);
    const handle = r.handle;
    if (op.action === 'extend') {
      const calledAt = time.now();
      const ttl = op.ttl === undefined ? r.ttl : ttlFor(op.ttl);
      r.pending = handle.extend(op.ttl === undefined ? undefined : ttl).then((extended) => {
        if (!extended && wasLive && inTime() && !r.releasing) fail(`${r.name}'s extend() answered false while it held the lease`);
        if (extended && !r.op.autoRenew) hold.until = calledAt + ttl;
        if (extended) r.ttl = ttl;
      });
      return;
    }
    r.releasing = true;
    hold.ended = true;
    const first = handle.release().then((released) => {
      if (!released && wasLive && inTime()) fail(`${r.name}'s release() answered false while it held the lease`);
    });
    const second = op.action === 'double' ? handle.release().then((again) => again && fail(`${r.name}'s second release() answered true`)) : undefined;
    r.pending = Promise.all([first, second]);
  }

  async function step(op) {
    switch (op.t) {
      case 'go': {
        const way = op.way;
        const key = KEYS[op.key];
        start(newRequest(op, way, key));
        break;
      }
      case 'time':
        await time.pass(op.ms);
        break;
      case 'abort': {
        const open = requests.filter((r) => !r.settled && !r.aborted);
        if (open.length > 0) abort(open[op.nth % open.length]);
        break;
      }
      case 'lease':
        leaseStep(op);
        break;
      default: {
        const open = requests.filter((r) => r.never);
        open[op.nth % Math.max(open.length, 1)]?.never.resolve();
      }
    }
    await flush(1);
    checker.verify();
  }

  for (const op of plan.steps) await step(op);
  // The end: callbacks that never settle are let go, leases released, and time runs on
  // until every request has settled (a bound that only catches a hang).
  for (let round = 0; round < 400 && requests.some((r) => !r.settled || (r.handle && !r.releasing)); round++) {
    for (const r of requests) r.never?.resolve();
    while (requests.some((r) => r.handle && !r.releasing)) leaseStep({ nth: 0, action: 'release' });
    await time.pass(time.fake ? 50 : 10);
  }
  const stuck = requests.filter((r) => !r.settled).map((r) => `${r.name} (${r.way} on ${r.key})`);
  if (stuck.length > 0) fail(`never settled: ${stuck.join(', ')}`);
  await Promise.all(requests.map((r) => r.pending));
  checker.verify();
  if (plan.store === 'memory' && time.fake) {
    await time.pass(1_000);
    for (const key of KEYS) if (await store.isLocked(key)) fail(`${key} is still locked after everything settled`);
  }
  checker.verify();
  return requests.length;
}

export { Violation };
