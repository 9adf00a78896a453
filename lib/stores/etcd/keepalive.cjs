'use strict';
/**
 * Lease keep-alives for `EtcdLockStore`, over one `LeaseKeepAlive` stream of the client's
 * (opened on the first keep-alive, ended once none has been pending for LINGER_MS, so
 * an idle store holds no call open and never keeps a process alive). etcd answers the
 * requests of one stream in order, each with the lease's ID and its remaining TTL in
 * seconds (0: the lease is gone).
 */

const { describe } = require('../../common/describe.cjs');

// How long the stream stays open with nothing pending: renewals every ttl/3 reuse it.
const LINGER_MS = 1_000;

function noop() {}

class KeepAlives {
  #leaseClient;
  #stream = null; // the open stream, once open
  #opening = false;
  #unsent = []; // IDs to write once the stream is open
  #pending = new Map(); // lease ID -> [{ resolve, reject }], in the order sent
  #count = 0;
  #lingerTimer = undefined;

  /** @param {object} leaseClient the client's `leaseClient` (etcd3's RPC LeaseClient) */
  constructor(leaseClient) {
    this.#leaseClient = leaseClient;
  }

  /** Sends one keep-alive for lease `id`; resolves to its remaining TTL in seconds (0: gone). */
  send(id) {
    return new Promise((resolve, reject) => {
      let waiting = this.#pending.get(id);
      if (waiting === undefined) {
        waiting = [];
        this.#pending.set(id, waiting);
      }
      waiting.push({ resolve, reject });
      this.#count += 1;
      if (this.#lingerTimer !== undefined) {
        clearTimeout(this.#lingerTimer);
        this.#lingerTimer = undefined;
      }
      if (this.#stream !== null) {
        this.#stream.write({ ID: id });
      } else {
        this.#unsent.push(id);
        this.#open();
      }
    });
  }

  #open() {
    if (this.#opening) return;
    this.#opening = true;
    let opened;
    try {
      opened = Promise.resolve(this.#leaseClient.leaseKeepAlive());
    } catch (err) {
      opened = Promise.reject(err);
    }
    opened.then(
      (stream) => {
        this.#opening = false;
        this.#stream = stream;
        stream.on('data', (reply) => this.#answered(stream, reply));
        stream.on('error', (err) => this.#failed(stream, err));
        stream.on('end', () => this.#failed(stream, new Error('EtcdLockStore: the lease keep-alive stream ended')));
        const ids = this.#unsent;
        this.#unsent = [];
        for (const id of ids) stream.write({ ID: id });
        // Everything it was opened for failed meanwhile (a close()): it lingers, then ends.
        if (this.#count === 0) this.#linger(stream);
      },
      (err) => {
        this.#opening = false;
        this.#failAll(err);
      },
    );
  }

  #answered(stream, reply) {
    const id = reply == null ? undefined : String(reply.ID);
    const waiting = this.#pending.get(id);
    const head = waiting?.shift();
    if (head === undefined) return; // not ours to wait for (a duplicate, or already failed)
    if (waiting.length === 0) this.#pending.delete(id);
    this.#count -= 1;
    const ttl = Number(reply.TTL);
    if (Number.isFinite(ttl)) head.resolve(ttl);
    else head.reject(new Error(`EtcdLockStore: unexpected keep-alive answer: TTL ${describe(reply.TTL)}`));
    if (this.#count === 0 && stream === this.#stream) this.#linger(stream);
  }

  #linger(stream) {
    this.#lingerTimer = setTimeout(() => {
      this.#lingerTimer = undefined;
      if (this.#count === 0 && stream === this.#stream) {
        this.#stream = null;
        stream.on('error', noop);
        stream.end();
      }
    }, LINGER_MS);
    this.#lingerTimer.unref?.();
  }

  #failed(stream, err) {
    if (stream !== this.#stream) return;
    this.#stream = null;
    stream.on('error', noop);
    this.#failAll(err);
  }

  #failAll(err) {
    const pending = [...this.#pending.values()].flat();
    this.#pending.clear();
    this.#unsent = [];
    this.#count = 0;
    for (const p of pending) p.reject(err);
  }

  /** Ends the stream; keep-alives still pending reject. */
  close() {
    if (this.#lingerTimer !== undefined) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    const stream = this.#stream;
    this.#stream = null;
    if (stream !== null) {
      stream.on('error', noop);
      stream.end();
    }
    this.#failAll(new Error('EtcdLockStore: closed'));
  }
}

module.exports = { KeepAlives };
