'use strict';
/**
 * Permits' grants of one EtcdLockStore, handed to its engine in token order per key.
 * Several holders of a key are granted at once, by acquires in flight together and by
 * watches; their answers may come back in any order, while the engine takes a token
 * lower than one it already saw for the key as a store gone back. So a grant (an
 * acquire's answer, a waiter's offer) is delivered only once every acquire that was in
 * flight when it came has answered, and after every lower token that is waiting so.
 * An acquire that started later can only get a higher token (a later revision).
 * An answer reaches the engine some microtasks after its promise resolves, an offer at
 * once: after an answer, the next grant of the key waits for the next macrotask.
 */

// A grant waits for the acquires in flight at most this long: one stuck (a request that
// never answers) must not hold the key's grants back; answering later, lower, it fails.
const MAX_WAIT_MS = 2_000;

class TokenOrder {
  #keys = new Map(); // key -> { flying: Set of tickets, ready: tickets with a token, undelivered, paused }

  #state(key) {
    let st = this.#keys.get(key);
    if (st === undefined) {
      st = { flying: new Set(), ready: [], paused: false };
      this.#keys.set(key, st);
    }
    return st;
  }

  /** An acquire on `key` starts: its ticket. */
  begin(key) {
    const ticket = { key, token: 0, waitFor: undefined, deliver: undefined, answered: false, timer: undefined };
    this.#state(key).flying.add(ticket);
    return ticket;
  }

  /**
   * `ticket` came to `token` (undefined: no grant): `deliver` runs now, or once the
   * acquires in flight now have answered and every lower token was delivered.
   */
  settle(ticket, token, deliver, answered = false) {
    const st = this.#state(ticket.key);
    st.flying.delete(ticket);
    if (token === undefined) {
      deliver();
    } else {
      ticket.token = token;
      ticket.waitFor = new Set(st.flying);
      ticket.deliver = deliver;
      ticket.answered = answered;
      if (ticket.waitFor.size > 0) {
        ticket.timer = setTimeout(() => {
          ticket.waitFor.clear();
          this.#pump(ticket.key, st);
        }, MAX_WAIT_MS);
        ticket.timer.unref?.();
      }
      st.ready.push(ticket);
      st.ready.sort((a, b) => a.token - b.token);
    }
    this.#pump(ticket.key, st);
  }

  /** A grant with nothing in flight to wait for (a waiter let in): `settle` at once. */
  grant(key, token, deliver) {
    this.settle(this.begin(key), token, deliver);
  }

  /** Resolves to `answer` when its token's turn comes (see settle). */
  answer(ticket, answer) {
    const token = answer !== undefined && 'fencingToken' in answer ? answer.fencingToken : undefined;
    return new Promise((resolve) => this.settle(ticket, token, () => resolve(answer), true));
  }

  #pump(key, st) {
    while (st.ready.length > 0 && !st.paused) {
      const head = st.ready[0];
      for (const t of head.waitFor) if (!st.flying.has(t)) head.waitFor.delete(t);
      if (head.waitFor.size > 0) break;
      st.ready.shift();
      if (head.timer !== undefined) clearTimeout(head.timer);
      head.deliver();
      if (head.answered) {
        st.paused = true;
        setImmediate(() => {
          st.paused = false;
          this.#pump(key, st);
        });
      }
    }
    if (st.flying.size === 0 && st.ready.length === 0 && !st.paused) this.#keys.delete(key);
  }
}

module.exports = { TokenOrder };
