'use strict';
// The memory stores' fast path: an execution on a free memory-store key is granted here,
// without a call into the engine, and handed over to the engine before anything else
// touches its key. docs/ARCHITECTURE.md ("The fast path") states the rules; in short:
//   - The engine shares words with the host (core/src/fast_words.rs): the memory
//     stores' last fencing token, and per bucket of (store, key) how many keys in it
//     the engine keeps a record of (a lease not released, or waiters).
//   - A key is granted here only when its bucket reads 0 and no fast holder has it;
//     the token is the token word plus one, written back.
//   - A fast hold lives only in `held` (one Map per memory store). Before a call that
//     can touch its key (an execution through the engine, a manual lease, a direct store
//     call), `handOver` gives it to the engine (`adopt`), which then renews, releases
//     and hands it to waiters as any lease of its own.
//   - The callback of every execution starts from a microtask, after execute() returned.

const { startInJob } = require('./callbacks.cjs');

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

/** The fast path of one engine host. */
class FastPath {
  constructor(host) {
    this.host = host;
    // The engine's shared words (a Float64Array; see `wordsNow`).
    this.words = undefined;
    // Per memory store id: key -> the Execution holding it on the fast path.
    this.held = [];
  }

  /** The fast holders of memory store `store`: a Map the pipelines on it keep. */
  heldOn(store) {
    return (this.held[store] ??= new Map());
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
   * is free, and schedules its callback; false when the engine must decide. A fast
   * holder of the key is handed over to the engine first.
   */
  grant(rec, lock, key) {
    const held = lock.held;
    if (held.size !== 0) {
      const holder = held.get(key);
      if (holder !== undefined) {
        this.handOver(holder);
        return false;
      }
    }
    const words = this.wordsNow();
    const bucket = lock.bucket >= 0 ? lock.bucket : bucketOf(lock.id, key);
    if (words[BUSY_FIRST + bucket] !== 0) return false;
    const token = words[TOKEN_WORD] + 1;
    words[TOKEN_WORD] = token;
    held.set(key, rec);
    rec.fastHeld = held;
    rec.since = this.now();
    this.schedule(rec, token);
    return true;
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
      for (const rec of [...held.values()]) rec.retire(failure);
      held.clear();
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
   * now on it is an engine execution, which `finish` releases through the engine.
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
  }
}

module.exports = { FastPath, bucketOf, TOKEN_WORD, BUSY_FIRST, BUCKETS, HANDOFF_WORD };
