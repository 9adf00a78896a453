// The contract model's online checks (js-tests/contract-model.test.mjs): what holds at
// every instant of a run, checked as things happen, each failure thrown as a Violation
// naming what broke. The world (world.mjs) reports holds, ends, grants and events here.
//
// Permits (SPEC §8) come in through `permitOf`, which reads a request's plan step
// (`op.permit`, plan.mjs): today none has one, so every hold is exclusive with weight 1
// on a key of limit 1. With permits, `admits` sums them: nothing else here changes.

export class Violation extends Error {}

/** What a hold takes of its key: exclusive weight 1 of a limit of 1, until permits exist. */
export function permitOf(request) {
  const permit = request.op?.permit;
  return { limit: permit?.limit ?? 1, weight: permit?.weight ?? 1, mode: permit?.mode ?? 'exclusive' };
}

/** Whether `holds` (live, on one key) may be joined by `next`. */
function admits(holds, next) {
  const permit = permitOf(next);
  if (holds.length === 0) return true;
  if (permit.mode === 'shared' && holds.every((h) => permitOf(h.request).mode === 'shared')) return true;
  if (permit.mode !== 'exclusive' || holds.some((h) => permitOf(h.request).mode !== 'exclusive')) return false;
  const used = holds.reduce((sum, h) => sum + permitOf(h.request).weight, 0);
  return used + permit.weight <= permit.limit;
}

export class Checker {
  constructor(now) {
    this.now = now;
    this.live = new Map(); // key -> [hold]
    this.lastToken = new Map(); // key -> the largest token granted
    this.waiting = new Map(); // key -> [request] in arrival order (FIFO-checked keys only)
    this.acquiredEvents = new Map(); // key -> the request of the last `acquired` event
    this.violations = [];
  }

  /** Throws a Violation, and keeps it: one thrown inside a callback is the run's failure all the same. */
  fail(message) {
    const violation = new Violation(`${message} (at ${Math.round(this.now())} ms)`);
    this.violations.push(violation);
    throw violation;
  }

  /** Throws the first violation seen, if any. */
  verify() {
    if (this.violations.length > 0) throw this.violations[0];
  }

  /** A request starts waiting for `key` in arrival order (only where FIFO is promised). */
  arrived(request, key) {
    let queue = this.waiting.get(key);
    if (!queue) this.waiting.set(key, (queue = []));
    queue.push(request);
  }

  left(request, key) {
    const queue = this.waiting.get(key);
    const at = queue?.indexOf(request) ?? -1;
    if (at >= 0) queue.splice(at, 1);
  }

  /** Whether `hold` still holds by what its holder was told. */
  isLive(hold) {
    if (hold.ended || hold.request.lost) return false;
    return hold.until === undefined || this.now() < hold.until;
  }

  /**
   * `request` holds `key` under `token` from now (its callback starts, or its handle
   * resolves); `token` undefined: an outer lock, whose token its holder is not told.
   */
  hold(request, key, token, until) {
    if (token !== undefined) {
      if (typeof token !== 'number' || !(token > 0)) this.fail(`${request.name} holds ${key} with token ${token}`);
      const last = this.lastToken.get(key) ?? 0;
      if (token <= last) this.fail(`${request.name} holds ${key} with token ${token}, not above the key's last ${last}`);
      this.lastToken.set(key, token);
    }
    const holds = (this.live.get(key) ?? []).filter((h) => this.isLive(h));
    if (!admits(holds, request)) {
      const others = holds.map((h) => `${h.request.name} (token ${h.token})`).join(', ');
      this.fail(`${request.name} holds ${key} (token ${token}) while ${others} still hold${holds.length > 1 ? '' : 's'} it`);
    }
    this.checkFifo(request, key);
    const hold = { request, key, token, until, ended: false };
    holds.push(hold);
    this.live.set(key, holds);
    return hold;
  }

  /** No request that came earlier for `key`, and still waits within its `wait`, is passed over. */
  checkFifo(request, key) {
    const queue = this.waiting.get(key);
    if (!queue) return;
    // Only requests of one lock are queued here (checkers of several locks' order are not).
    const at = queue.indexOf(request);
    if (at < 0) return;
    for (const earlier of queue.slice(0, at)) {
      // A waiter whose deadline is (about) now may lose to a newcomer by design.
      if (earlier.deadline !== undefined && this.now() >= earlier.deadline - 5) continue;
      if (earlier.settled || earlier.aborted) continue;
      this.fail(`${request.name} took ${key} ahead of ${earlier.name}, which came first and still waits (FIFO)`);
    }
    queue.splice(at, 1);
  }

  /**
   * A telemetry event of a pipeline with telemetry: a holder's loss is told before the
   * key's next holder's `acquired`, on every path. (A release on a granting store may
   * be told after: the store hands the lease on before its answer comes.)
   */
  event(request, event) {
    const key = event.key;
    if (event.type === 'acquired') {
      this.acquiredEvents.set(key, request);
    } else if (event.type === 'lost') {
      const last = this.acquiredEvents.get(key);
      if (last !== undefined && last !== request) {
        this.fail(`${request.name}'s 'lost' on ${key} came after ${last.name}'s 'acquired' of it`);
      }
    }
  }
}
