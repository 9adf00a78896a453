'use strict';
/**
 * Deletion watches for `EtcdLockStore`, over one `Watch` stream of the client's. A watch
 * is one message to create (with an id the store picks, as etcd 3.4 allows) and one to
 * cancel, neither waited for: a waiter's watch costs no round trip of its own. The
 * stream is opened on the first watch and ended once none has been live for LINGER_MS,
 * so an idle store holds no call open and keeps no process alive. A stream that fails
 * is replaced (after RETRY_MS, doubling to MAX_RETRY_MS) and its watches are created
 * again from the revision each started at: etcd replays what they missed. A watch that
 * etcd cancels itself (its revision compacted away) is reported to its `onLost`.
 */

const LINGER_MS = 1_000;
const RETRY_MS = 100;
const MAX_RETRY_MS = 1_000;
const NOPUT = 0; // WatchCreateRequest.FilterType: no put events

function noop() {}

// etcd3 loads etcd's protos with enums as names, its own spelling ('Delete'); 1 is DELETE.
function isDelete(event) {
  return event?.type === 1 || String(event?.type).toUpperCase() === 'DELETE';
}

class DeletionWatches {
  #watchClient;
  #stream = null;
  #opening = false;
  #watches = new Map(); // id -> { id, key, from, onDelete, onLost, rangeEnd, puts }
  #nextId = 1;
  #lingerTimer = undefined;
  #retryTimer = undefined;
  #retryMs = RETRY_MS;

  /** @param {object} watchClient the client's `watchClient` (etcd3's RPC WatchClient) */
  constructor(watchClient) {
    this.#watchClient = watchClient;
  }

  /**
   * Calls `onDelete()` once when `key` (a Buffer, the whole key) is deleted at revision
   * `from` or later, or `onLost()` if etcd ends the watch. Returns a function that stops
   * it (idempotent); neither is called after that. With `rangeEnd`, a deletion of any
   * key from `key` to it counts; with `puts`, a put of the key counts too.
   */
  watch(key, from, onDelete, onLost, { rangeEnd, puts = false } = {}) {
    const w = { id: this.#nextId++, key, from, onDelete, onLost, rangeEnd, puts };
    this.#watches.set(w.id, w);
    if (this.#lingerTimer !== undefined) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    if (this.#stream !== null) this.#create(w);
    else this.#open();
    return () => this.#stop(w.id);
  }

  #create(w) {
    const request = { key: w.key, start_revision: String(w.from), filters: w.puts ? [] : [NOPUT], watch_id: String(w.id) };
    if (w.rangeEnd !== undefined) request.range_end = w.rangeEnd;
    this.#stream.write({ create_request: request });
  }

  #stop(id) {
    if (!this.#watches.delete(id)) return;
    if (this.#stream !== null) this.#stream.write({ cancel_request: { watch_id: String(id) } });
    if (this.#watches.size === 0) this.#linger();
  }

  #open() {
    if (this.#opening || this.#retryTimer !== undefined) return;
    this.#opening = true;
    let opened;
    try {
      opened = Promise.resolve(this.#watchClient.watch());
    } catch (err) {
      opened = Promise.reject(err);
    }
    opened.then(
      (stream) => {
        this.#opening = false;
        this.#stream = stream;
        this.#retryMs = RETRY_MS;
        stream.on('data', (reply) => this.#answered(reply));
        stream.on('error', () => this.#failed(stream));
        stream.on('end', () => this.#failed(stream));
        for (const w of this.#watches.values()) this.#create(w);
        if (this.#watches.size === 0) this.#linger();
      },
      () => {
        this.#opening = false;
        this.#retryLater();
      },
    );
  }

  #answered(reply) {
    const w = this.#watches.get(Number(reply?.watch_id));
    if (w === undefined) return; // stopped already (the answer to our cancel, a late event)
    if (reply.canceled) {
      this.#watches.delete(w.id);
      if (this.#watches.size === 0) this.#linger();
      w.onLost();
      return;
    }
    if (w.puts ? reply.events?.length > 0 : reply.events?.some(isDelete)) {
      this.#stop(w.id);
      w.onDelete();
    }
  }

  #failed(stream) {
    if (stream !== this.#stream) return;
    this.#stream = null;
    stream.on('error', noop);
    stream.cancel?.();
    if (this.#watches.size > 0) this.#retryLater();
  }

  #retryLater() {
    if (this.#retryTimer !== undefined) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      if (this.#watches.size > 0 && this.#stream === null) this.#open();
    }, this.#retryMs);
    this.#retryTimer.unref?.();
    this.#retryMs = Math.min(MAX_RETRY_MS, this.#retryMs * 2);
  }

  #linger() {
    if (this.#lingerTimer !== undefined) return;
    this.#lingerTimer = setTimeout(() => {
      this.#lingerTimer = undefined;
      if (this.#watches.size === 0) this.#end();
    }, LINGER_MS);
    this.#lingerTimer.unref?.();
  }

  #end() {
    const stream = this.#stream;
    this.#stream = null;
    if (stream === null) return;
    stream.on('error', noop);
    stream.end();
    stream.cancel?.();
  }

  /** Stops every watch and ends the stream. */
  close() {
    for (const timer of [this.#lingerTimer, this.#retryTimer]) if (timer !== undefined) clearTimeout(timer);
    this.#lingerTimer = undefined;
    this.#retryTimer = undefined;
    this.#watches.clear();
    this.#end();
  }
}

module.exports = { DeletionWatches };
