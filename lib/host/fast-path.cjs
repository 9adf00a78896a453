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
//   - An execution that would wait as long as it takes (`wait: Infinity`) for a key held
//     here queues behind the holder (`fastWaiters`, FIFO), and takes the key from it at
//     its finish under the token word plus one: a contended handoff with no engine call.
//     The queue is a cache the engine revokes: handing the holder over starts its waiters
//     in the engine, in their order, where they wait as any other (`handOver`).
//   - The callback of every execution starts from a microtask, after execute() returned.

const { startInJob } = require('./callbacks.cjs');
const { FastHolds } = require('./fast-holds.cjs');

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

/** The executions queued behind a fast holder, first come first: a list through `nextWaiter`. */
class FastWaiters {
  constructor(rec) {
    this.first = rec;
    this.last = rec;
  }

  push(rec) {
    this.last.nextWaiter = rec;
    this.last = rec;
  }

  /** The first waiter, taken out; undefined when none is left. */
  shift() {
    const rec = this.first;
    if (rec === undefined) return undefined;
    this.first = rec.nextWaiter;
    rec.nextWaiter = undefined;
    if (this.first === undefined) this.last = undefined;
    return rec;
  }
}

/** The fast path of one engine host. */
class FastPath {
  constructor(host) {
    this.host = host;
    // The engine's shared words (a Float64Array; see `wordsNow`).
    this.words = undefined;
    // Per memory store id: key -> the Execution holding it on the fast path.
    this.held = [];
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

  /**
   * Grants `rec` (one lock, `lock`, on a memory store of this host) the key `key` when it
   * is free, and schedules its callback (GRANTED); NOT_GRANTED when the engine must
   * decide. A fast holder of the key keeps it and queues `rec` (QUEUED) when `rec` waits
   * without a deadline, which only the engine keeps; otherwise it is handed over first.
   */
  grant(rec, lock, key) {
    const held = lock.held;
    if (held.size !== 0) {
      const holder = held.get(key);
      if (holder !== undefined) {
        if (lock.waitMs < 0) {
          const waiters = holder.fastWaiters;
          if (waiters === undefined) holder.fastWaiters = new FastWaiters(rec);
          else waiters.push(rec);
          rec.fastWaiting = true;
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

  /**
   * Fast holder `rec` is done with its key: the first of its waiters takes it, under the
   * token word plus one, and is returned (to be started by `startNext` once `rec` has
   * settled its part); with no waiter the key is free.
   */
  free(rec) {
    const held = rec.fastHeld;
    const key = rec.keys[0];
    rec.fastHeld = undefined;
    const waiters = rec.fastWaiters;
    if (waiters === undefined) {
      held.delete(key);
      return undefined;
    }
    rec.fastWaiters = undefined;
    const next = waiters.shift();
    next.fastWaiting = false;
    if (waiters.first !== undefined) next.fastWaiters = waiters;
    held.set(key, next);
    next.fastHeld = held;
    next.since = this.now();
    const words = this.wordsNow();
    next.token = words[TOKEN_WORD] + 1;
    words[TOKEN_WORD] = next.token;
    return next;
  }

  /**
   * Starts the callback of `next`, the key passed to it by `free`: from the promise job it
   * made in execute() (`awaitGrant`), or one made now where it has none (no ambient
   * context yet: a chain of synchronous callbacks must not nest here).
   */
  startNext(next) {
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

  /** `rec` waits in a fast holder's queue: that holder and its waiters go to the engine. */
  revokeFor(rec) {
    const holder = rec.locks[0].held.get(rec.keys[0]);
    if (holder !== undefined) this.handOver(holder);
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
    for (let waiter = waiters.shift(); waiter !== undefined; waiter = waiters.shift()) {
      waiter.fastWaiting = false;
      try {
        waiter.pipeline.startInEngine(waiter, waiter.keys, waiter.callerSignal);
      } catch (error) {
        waiter.fail(error);
      }
    }
  }
}

module.exports = { FastPath, bucketOf, TOKEN_WORD, BUSY_FIRST, BUCKETS, HANDOFF_WORD, NOT_GRANTED, GRANTED, QUEUED };
