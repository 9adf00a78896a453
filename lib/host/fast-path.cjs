'use strict';
// The memory stores' fast path: an execution on a free memory-store key is granted here,
// without a call into the engine, and handed over to the engine before anything else
// touches its key. docs/ARCHITECTURE.md ("The fast path") states the rules; in short:
//   - The engine shares words with the host (core/src/fast_words.rs): the memory
//     stores' last fencing token, and per bucket of (store, key) how many keys in it
//     the engine keeps a record of (a lease not released, or waiters).
//   - A key is granted here only when its bucket reads 0 and no fast holder has it;
//     the token is the token word plus one, written back.
//   - A fast hold lives only in `held` (one FastHolds per memory store: fast-holds.cjs). Before a call that
//     can touch its key (an execution through the engine, a manual lease, a direct store
//     call), `handOver` gives it to the engine (`adopt`), which then renews, releases
//     and hands it to waiters as any lease of its own.
//   - An execution that waits for a key held here queues behind the holder
//     (`fastWaiters`, FIFO) and takes the key from it at its finish under the token word
//     plus one: a contended handoff with no engine call. The queue is a cache the engine
//     revokes: handing the holder over starts its waiters in the engine, in their order,
//     each with the wait it has left (`handOver`). A queue is handed over by its earliest
//     deadline at the latest, so that the engine times its waiters out.
//   - The callback of every execution starts from a microtask, after execute() returned.

const { startInJob } = require('./callbacks.cjs');
const { FastHolds } = require('./fast-holds.cjs');
const { FastWaiters } = require('./fast-waiters.cjs');

const TOKEN_WORD = 0;
const BUSY_FIRST = 1;
const BUCKETS = 1024;
// The token of the execution a `finish` handed the key to (core/src/fast_words.rs).
const HANDOFF_WORD = BUSY_FIRST + BUCKETS;

/** The bucket of `key` on memory store `store`; the same FNV-1a as `fast_words::bucket`. */
function bucketOf(store, key) {
  let hash = (0x811c9dc5 ^ store) >>> 0;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) & (BUCKETS - 1);
}

const RESOLVED = Promise.resolve();

// What `grant` did with an execution.
const NOT_GRANTED = 0;
const GRANTED = 1;
// Queued behind the key's fast holder: its callback starts when the key is passed to it.
const QUEUED = 2;

/** The fast path of one engine host. */
class FastPath {
  constructor(host) {
    this.host = host;
    // The engine's shared words (a Float64Array; see `wordsNow`).
    this.words = undefined;
    // Per memory store id: key -> the Execution holding it on the fast path.
    this.held = [];
    // The queues with a deadline (`FastWaiters#deadline`), to be handed over by then.
    this.expiring = new Set();
  }

  /** The fast holders of memory store `store`: a FastHolds the pipelines on it keep. */
  heldOn(store) {
    return (this.held[store] ??= new FastHolds());
  }

  /**
   * When a fast hold began, for the engine to place its renewals when it takes the hold
   * over: a fake clock's time. On a real clock a renewal may fall at any instant, so the
   * engine takes the hold as renewed at the handover, and no clock is read per grant.
   */
  now() {
    const host = this.host;
    return host.fake ? host.fakeNow : 0;
  }

  /** The clock deadlines are kept on: a fake clock's time, or the system's, in ms. */
  clock() {
    const host = this.host;
    return host.fake ? host.fakeNow : performance.now();
  }

  /**
   * Grants `rec` (one lock, `lock`, on a memory store of this host) the key `key` when it
   * is free, and schedules its callback (GRANTED); NOT_GRANTED when the engine must
   * decide. A fast holder of the key keeps it and queues `rec` (QUEUED) when `rec` waits;
   * with `wait: 0` it is handed over, and the engine answers.
   */
  grant(rec, lock, key) {
    const held = lock.held;
    if (held.size !== 0) {
      const holder = held.get(key);
      if (holder !== undefined) {
        if (lock.waitMs !== 0) {
          this.queue(holder, rec, lock.waitMs);
          return QUEUED;
        }
        this.handOver(holder);
        return NOT_GRANTED;
      }
    }
    const words = this.wordsNow();
    let bucket = lock.bucket;
    if (bucket < 0) {
      // A key given per execution: the last one's bucket is kept, as keys often repeat.
      if (key !== lock.lastKey) {
        lock.lastBucket = bucketOf(lock.id, key);
        lock.lastKey = key;
      }
      bucket = lock.lastBucket;
    }
    if (words[BUSY_FIRST + bucket] !== 0) return NOT_GRANTED;
    const token = words[TOKEN_WORD] + 1;
    words[TOKEN_WORD] = token;
    held.set(key, rec);
    rec.fastHeld = held;
    rec.since = this.now();
    this.schedule(rec, token);
    return GRANTED;
  }

  /** Queues `rec`, which waits `waitMs` (-1: without a deadline), behind fast holder `holder`. */
  queue(holder, rec, waitMs) {
    const waiters = (holder.fastWaiters ??= new FastWaiters(holder.fastHeld, holder.keys[0]));
    waiters.push(rec);
    rec.fastWaiting = true;
    if (waitMs > 0) {
      rec.waitUntil = this.clock() + waitMs;
      if (rec.waitUntil < waiters.deadline) this.expireAt(waiters, rec.waitUntil);
    }
  }

  /**
   * Hands queue `waiters` over to the engine by `at` at the latest: on the system clock
   * from a timer, on a fake clock as it is advanced (`expireBy`).
   */
  expireAt(waiters, at) {
    waiters.deadline = at;
    this.expiring.add(waiters);
    if (this.host.fake) return;
    if (waiters.timer !== undefined) clearTimeout(waiters.timer);
    // It holds the process as the engine's timer for a waiter's deadline would.
    waiters.timer = setTimeout(() => this.expire(waiters), Math.max(0, at - performance.now()));
  }

  /** Queue `waiters` keeps no deadline any more (emptied, or handed over). */
  unwatch(waiters) {
    if (waiters.deadline === Infinity) return;
    waiters.deadline = Infinity;
    this.expiring.delete(waiters);
    if (waiters.timer !== undefined) {
      clearTimeout(waiters.timer);
      waiters.timer = undefined;
    }
  }

  /**
   * The deadline of queue `waiters` has come: its holder and it go to the engine, which
   * times the due waiters out. When the waiters it was set for are served already, the
   * queue stays here until the earliest deadline of those left.
   */
  expire(waiters) {
    waiters.timer = undefined;
    if (this.host.dead) return;
    const at = waiters.earliest();
    if (at === Infinity) return this.unwatch(waiters);
    if (at > this.clock() + 1) return this.expireAt(waiters, at);
    return this.revoke(waiters);
  }

  /** A fake clock moves to `at`: each queue with a deadline by then goes to the engine first. */
  expireBy(at) {
    if (this.expiring.size === 0 || this.host.dead) return;
    for (const waiters of [...this.expiring]) {
      if (waiters.deadline > at) continue;
      const earliest = waiters.earliest();
      if (earliest <= at) this.revoke(waiters);
      else if (earliest === Infinity) this.unwatch(waiters);
      else waiters.deadline = earliest;
    }
  }

  /** Hands queue `waiters` over to the engine with its holder. */
  revoke(waiters) {
    const holder = waiters.held.get(waiters.key);
    if (holder !== undefined && holder.fastWaiters === waiters) this.handOver(holder);
    else this.unwatch(waiters);
  }

  /**
   * Fast holder `rec` is done with its key: the first of its waiters takes it, under the
   * token word plus one, and its callback's job is queued (ahead of `rec`'s caller, who
   * resumes once `rec` settles); with no waiter the key is free.
   */
  free(rec) {
    const held = rec.fastHeld;
    const key = rec.keys[0];
    rec.fastHeld = undefined;
    const waiters = rec.fastWaiters;
    if (waiters === undefined) {
      held.delete(key);
      return;
    }
    rec.fastWaiters = undefined;
    const next = waiters.shift();
    next.fastWaiting = false;
    if (waiters.first !== undefined) next.fastWaiters = waiters;
    else this.unwatch(waiters);
    held.set(key, next);
    next.fastHeld = held;
    next.since = this.now();
    const words = this.wordsNow();
    next.token = words[TOKEN_WORD] + 1;
    words[TOKEN_WORD] = next.token;
    // From the promise job it made in execute() (`awaitGrant`), or one made now where it
    // has none (no ambient context): a chain of synchronous callbacks must not nest here.
    if (next.granted !== undefined) next.run(next.token);
    else this.schedule(next, next.token);
  }

  /**
   * The engine's shared words, asked for once (napi makes one external buffer of them)
   * and again only when a grown wasm memory has detached the view.
   */
  wordsNow() {
    const words = this.words;
    if (words !== undefined && words.length !== 0) return words;
    return (this.words = this.host.engine.fastWords());
  }

  /** The innermost token of the execution the last `finish` handed a key to. */
  handoffToken() {
    return this.wordsNow()[HANDOFF_WORD];
  }

  /**
   * Runs `rec`'s callback with `token` from a promise job of its own, made here, in
   * execute(): never inside the execute() that started it, and in its caller's async
   * context (a job runs in the context it was made in; one job for several callbacks
   * would run them all in the first one's).
   */
  schedule(rec, token) {
    rec.token = token;
    rec.scheduled = true;
    RESOLVED.then(() => startInJob(rec, token));
  }

  /** The engine died: its fast holders are retired like its executions (`EngineHost#die`). */
  retire(failure) {
    for (const waiters of [...this.expiring]) this.unwatch(waiters);
    for (const held of this.held) {
      if (held === undefined) continue;
      const holders = held.values();
      held.clear();
      for (const rec of holders) {
        const waiters = rec.fastWaiters;
        rec.fastWaiters = undefined;
        rec.fastHeld = undefined;
        rec.retire(failure);
        for (let waiter = waiters?.shift(); waiter !== undefined; waiter = waiters.shift()) waiter.fail(failure);
      }
    }
  }

  /**
   * Hands the fast holder of `key` on memory store `store`, if any, over to the engine.
   * Not once the engine is retired: its fast holders are retired with it (`retire`), also
   * when user code run meanwhile (an onLockLost) calls the store.
   */
  handOverKey(store, key) {
    if (this.host.dead) return;
    const held = this.held[store];
    if (held === undefined || held.size === 0) return;
    const holder = held.get(key);
    if (holder !== undefined) this.handOver(holder);
  }

  /** Hands over the fast holders of each memory-store lock of `locks` (at `keys`). */
  handOverAll(locks, keys) {
    for (let i = 0; i < locks.length; i++) {
      const held = locks[i].held;
      if (held !== undefined && held.size !== 0) {
        const holder = held.get(keys[i]);
        if (holder !== undefined) this.handOver(holder);
      }
    }
  }

  /**
   * Gives fast holder `rec` to the engine (`adopt`), under a fresh execution id: from
   * now on it is an engine execution, which `finish` releases through the engine. Its
   * waiters then start in the engine, in their order, behind it.
   */
  handOver(rec) {
    const host = this.host;
    const key = rec.keys[0];
    rec.fastHeld.delete(key);
    rec.fastHeld = undefined;
    rec.id = host.newExecId();
    host.execs.set(rec.id, rec);
    const lock = rec.locks[0];
    const heldFor = this.host.fake ? this.now() - rec.since : 0;
    host.call(() =>
      host.engine.adopt(rec.id, rec.pipeline.options, lock.id, key, lock.ttlMs, lock.waitMs, rec.token, heldFor, lock.ownerName),
    );
    const waiters = rec.fastWaiters;
    if (waiters === undefined) return;
    rec.fastWaiters = undefined;
    this.unwatch(waiters);
    const now = this.clock();
    for (let waiter = waiters.shift(); waiter !== undefined; waiter = waiters.shift()) {
      waiter.fastWaiting = false;
      // The wait it has left, in whole ms, rounded up: never timed out before its deadline.
      const waitMs = waiter.waitUntil === undefined ? undefined : Math.max(0, Math.ceil(waiter.waitUntil - now));
      try {
        waiter.pipeline.startInEngine(waiter, waiter.keys, waiter.callerSignal, waitMs);
      } catch (error) {
        waiter.fail(error);
      }
    }
  }
}

module.exports = { FastPath, bucketOf, TOKEN_WORD, BUSY_FIRST, BUCKETS, HANDOFF_WORD, NOT_GRANTED, GRANTED, QUEUED };
