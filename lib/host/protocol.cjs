'use strict';
// The protocol between the engine and its JavaScript host, defined once (the Rust side
// is core/src/host/mod.rs): the status word every mutating engine call returns, the option
// bits of `start`, the store kinds, and the flat effect records of `takeEffects`. Every
// other file reads these by name. core/tests/protocol.rs compares each `const NAME = n;`
// line below with the Rust constant of the same meaning: keep them one literal a line.

// ---- the status word ------------------------------------------------------------------
// The low byte holds the host's bits (the high nibble: effects wait, timer actions) and
// the call's result (the low nibble), whose meaning depends on the call: read it with
// that call's names below. Above the low byte, 256 × a number the result names (a
// token, an execution id or a request id): `payloadOf`.

const STATUS_EFFECTS = 16;
const STATUS_TIMER_REF = 32;
const STATUS_TIMER_UNREF = 64;
const STATUS_TIMER_ARM = 128;
const STATUS_HOST_BITS = STATUS_EFFECTS | STATUS_TIMER_REF | STATUS_TIMER_UNREF | STATUS_TIMER_ARM;
const STATUS_RESULT_BITS = 15;
const STATUS_PAYLOAD_UNIT = 256;

/** The low byte of a status word: host bits and result, without the payload. */
function statusOf(word) {
  return word % STATUS_PAYLOAD_UNIT;
}

/** The number above the status bits: what it is, the call's result says. */
function payloadOf(word) {
  return Math.floor(word / STATUS_PAYLOAD_UNIT);
}

/** The call's own result in a status (`statusOf`), its host bits left out. */
function resultOf(status) {
  return status & STATUS_RESULT_BITS;
}

// `start` and `startDefined`: every lock was granted in the call; run the callback now
// under the innermost token, the payload.
const STARTED_RUNNING = 1;
// `start` asked with OPTION_DIRECT: the one thing to do is lock 0's first acquire on a
// JS store (QUEUED: asking the store to queue the owner); the payload is its request id,
// and it is not among the effects.
const STARTED_STORE_CALL = 6;
const STARTED_STORE_CALL_QUEUED = 7;

// `finish`: settled in the call, with the callback's value, its error, a LockLostError
// (the callback failed after a loss), or (a manual lease) released but not held.
const FINISHED_VALUE = 2;
const FINISHED_CALLBACK_ERROR = 3;
const FINISHED_LOST = 4;
const FINISHED_NOT_HELD = 5;
// `finish` asked to hand off: the release granted the lock to the next waiter, whose
// execution id is the payload; run it now (its `run` effect is taken). A flag, with the
// settlement above beside it.
const FINISHED_HANDOFF = 8;
// `finish` asked to hand off: the one thing to do is the release of lock 0 on a JS
// store; the payload is its request id.
const FINISHED_STORE_CALL = 6;

/** How `finish` settled the execution (a FINISHED_* code), or 0 when a `settled` effect will say. */
function finishSettlement(status) {
  return status & STATUS_RESULT_BITS & ~FINISHED_HANDOFF;
}

/** `finish` granted the next waiter, whose id is the payload. */
function finishHandsOff(status) {
  return (status & FINISHED_HANDOFF) !== 0;
}

/** `finish` handed back the release of lock 0, whose request id is the payload. */
function finishCallsStore(status) {
  return (status & STATUS_RESULT_BITS) === FINISHED_STORE_CALL;
}

// `answerAcquire` and `answerRelease` asked `direct`: the answer granted the innermost
// lock (run the execution under the token just answered), or settled the execution as
// `finish` would have. No payload.
const ANSWERED_RUNNING = 1;
const ANSWERED_VALUE = 2;
const ANSWERED_CALLBACK_ERROR = 3;
const ANSWERED_NOT_HELD = 5;

// `granted`: the engine claimed the store's grant for one of its waiters.
const GRANT_CLAIMED = 1;
// `extend`: the lease was pushed out, or is gone (or the store refused).
const EXTENDED = 1;
const NOT_EXTENDED = 2;
// `memRelease`: the owner held a live lease.
const MEMORY_RELEASED = 1;

// ---- arguments --------------------------------------------------------------------------

// Option bits of `start` and `startDefined`.
const OPTION_RENEW = 1;
const OPTION_TELEMETRY = 2;
const OPTION_MANUAL = 4;
// The host can call a store at once (it is not applying effects): the first acquire may
// come back in the status word (STARTED_STORE_CALL).
const OPTION_DIRECT = 8;

// Store kinds: the engine's own memory store, and JS stores by how they wake waiters.
const STORE_MEMORY = 0;
const STORE_POLLED = 1;
const STORE_ANNOUNCING = 2;
const STORE_GRANTING = 3;
// A lock's kind argument: its store's kind plus LOCK_LINGER_UNIT x its linger in ms.
const LOCK_LINGER_UNIT = 256;
// The limit of a key used with modes (core/src/types.rs, SHARED_LIMIT): a reader takes
// one permit, a writer all of them.
const SHARED_LIMIT = 2147483647;

// ---- flat effects ------------------------------------------------------------------------
// `takeEffects()` answers one array of numbers: a header (how many strings
// `takeStrings()` holds, 0: do not ask), then EFFECT_WIDTH numbers per effect, read by
// `decodeEffect`. Slot A, B and C mean different things per kind.

const EFFECT_WIDTH = 8;
const EFFECT_FIRST = 1;
const SLOT_KIND = 0;
const SLOT_EXEC = 1;
const SLOT_LAYER = 2;
const SLOT_REQUEST = 3;
const SLOT_STORE = 4;
const SLOT_A = 5;
const SLOT_B = 6;
const SLOT_C = 7;

const EFFECT_CALL = 1;
const EFFECT_RUN = 2;
const EFFECT_LOST = 3;
const EFFECT_SETTLED = 4;
const EFFECT_EXTENDED = 5;
const EFFECT_WATCH = 6;
const EFFECT_EVENT = 7;

const METHOD_ACQUIRE = 1;
const METHOD_RENEW = 2;
const METHOD_RELEASE = 3;
// An acquire that asks a store that grants on release to queue the owner (it waits).
const METHOD_QUEUED_ACQUIRE = 4;

const OUTCOME_VALUE = 1;
const OUTCOME_CALLBACK_ERROR = 2;
const OUTCOME_NOT_HELD = 3;
const OUTCOME_ERROR = 4;

const ERROR_NOT_ACQUIRED = 1;
const ERROR_LOST = 2;
const ERROR_STORE_FAILED = 3;
const ERROR_ABORTED = 4;
const ERROR_TYPE = 5;
const ERROR_RANGE = 6;
const ERROR_LIMIT_MISMATCH = 7;

const EVENT_ACQUIRED = 1;
const EVENT_REJECTED = 2;
const EVENT_RENEWED = 3;
const EVENT_RENEWAL_FAILED = 4;
const EVENT_LOST = 5;
const EVENT_RELEASED = 6;
const EVENT_RELEASE_FAILED = 7;
const EVENT_ACQUIRE_FAILED = 8;
const EVENT_CANCELLED = 9;

/** Names by code, for the records handed to the host. */
function byCode(entries) {
  const names = [];
  for (const [code, name] of entries) names[code] = name;
  return Object.freeze(names);
}
const KINDS = byCode([
  [EFFECT_CALL, 'call'],
  [EFFECT_RUN, 'run'],
  [EFFECT_LOST, 'lost'],
  [EFFECT_SETTLED, 'settled'],
  [EFFECT_EXTENDED, 'extended'],
  [EFFECT_WATCH, 'watch'],
  [EFFECT_EVENT, 'event'],
]);
const METHODS = byCode([
  [METHOD_ACQUIRE, 'acquire'],
  [METHOD_RENEW, 'renew'],
  [METHOD_RELEASE, 'release'],
  [METHOD_QUEUED_ACQUIRE, 'acquire'],
]);
const OUTCOMES = byCode([
  [OUTCOME_VALUE, 'value'],
  [OUTCOME_CALLBACK_ERROR, 'callbackError'],
  [OUTCOME_NOT_HELD, 'notHeld'],
  [OUTCOME_ERROR, 'error'],
]);
const ERROR_CODES = byCode([
  [ERROR_NOT_ACQUIRED, 'LOCK_NOT_ACQUIRED'],
  [ERROR_LOST, 'LOCK_LOST'],
  [ERROR_STORE_FAILED, 'LOCK_STORE_FAILED'],
  [ERROR_ABORTED, 'ABORT_ERR'],
  [ERROR_TYPE, 'ERR_INVALID_ARG_TYPE'],
  [ERROR_RANGE, 'ERR_OUT_OF_RANGE'],
  [ERROR_LIMIT_MISMATCH, 'LOCK_LIMIT_MISMATCH'],
]);
const EVENTS = byCode([
  [EVENT_ACQUIRED, 'acquired'],
  [EVENT_REJECTED, 'rejected'],
  [EVENT_RENEWED, 'renewed'],
  [EVENT_RENEWAL_FAILED, 'renewalFailed'],
  [EVENT_LOST, 'lost'],
  [EVENT_RELEASED, 'released'],
  [EVENT_RELEASE_FAILED, 'releaseFailed'],
  [EVENT_ACQUIRE_FAILED, 'acquireFailed'],
  [EVENT_CANCELLED, 'cancelled'],
]);

// The `settled` record an answer's status stands for (ANSWERED_*), shared and frozen.
const SETTLED_BY_ANSWER = [];
SETTLED_BY_ANSWER[ANSWERED_VALUE] = Object.freeze({ outcome: 'value' });
SETTLED_BY_ANSWER[ANSWERED_CALLBACK_ERROR] = Object.freeze({ outcome: 'callbackError' });
SETTLED_BY_ANSWER[ANSWERED_NOT_HELD] = Object.freeze({ outcome: 'notHeld' });
// A plain `settled` effect (no error), by outcome code: nothing to decode per effect.
const SETTLED_BY_OUTCOME = [];
SETTLED_BY_OUTCOME[OUTCOME_VALUE] = SETTLED_BY_ANSWER[ANSWERED_VALUE];
SETTLED_BY_OUTCOME[OUTCOME_CALLBACK_ERROR] = SETTLED_BY_ANSWER[ANSWERED_CALLBACK_ERROR];
SETTLED_BY_OUTCOME[OUTCOME_NOT_HELD] = SETTLED_BY_ANSWER[ANSWERED_NOT_HELD];

/** The `settled` record for an answer's ANSWERED_VALUE, _CALLBACK_ERROR or _NOT_HELD. */
function settledByAnswer(result) {
  return SETTLED_BY_ANSWER[result];
}

/** How many strings a batch of effects points into (`takeStrings()`); 0: none to take. */
function stringCount(numbers) {
  return numbers[0];
}

/**
 * Decodes the effect at `n[i]` (`strings`: its batch's text) and hands it to the
 * matching method of `sink`:
 *   callEffect({ request, exec, store, method, ttl, key, owner, queue }, layer): a store
 *     call; `exec` 0 when no execution waits on it. A renewal or release of a lock
 *     comes without key and owner (undefined): they are those of that lock's acquire,
 *     which always comes first.
 *   runEffect(exec, token): every lock is held; `token` the innermost one, as granted.
 *   lostEffect(exec, layer)
 *   settledEffect(exec, { outcome, code?, message?, key?, method?, cause? }): `cause` is
 *     the request whose thrown value caused the error (0: none).
 *   extendedEffect(exec, ok)
 *   watchEffect({ store, watch, key }): start (or stop) watching a key for releases.
 *   eventEffect(exec, { outcome, layer, waited, lag, token, refused, cause, message }): `lag`
 *     for a renewal (ms behind its schedule), `refused` for a loss (the store said not ours).
 */
function decodeEffect(n, i, strings, sink) {
  const kind = n[i + SLOT_KIND];
  const exec = n[i + SLOT_EXEC];
  switch (kind) {
    case EFFECT_CALL: {
      const method = n[i + SLOT_A];
      const textAt = n[i + SLOT_C];
      const call = {
        request: n[i + SLOT_REQUEST],
        exec,
        store: n[i + SLOT_STORE],
        method: METHODS[method],
        ttl: n[i + SLOT_B],
        key: textAt < 0 ? undefined : strings[textAt],
        owner: textAt < 0 ? undefined : strings[textAt + 1],
        queue: method === METHOD_QUEUED_ACQUIRE,
      };
      return sink.callEffect(call, n[i + SLOT_LAYER]);
    }
    case EFFECT_RUN:
      return sink.runEffect(exec, n[i + SLOT_B]);
    case EFFECT_LOST:
      return sink.lostEffect(exec, n[i + SLOT_LAYER]);
    case EFFECT_SETTLED: {
      const outcome = n[i + SLOT_A];
      if (outcome !== OUTCOME_ERROR) return sink.settledEffect(exec, SETTLED_BY_OUTCOME[outcome]);
      const messageAt = n[i + SLOT_C];
      if (n[i + SLOT_B] === ERROR_LIMIT_MISMATCH) {
        // The key's limit rides in the request slot, the lock's in the store slot.
        return sink.settledEffect(exec, {
          outcome: 'error',
          code: 'LOCK_LIMIT_MISMATCH',
          message: strings[messageAt],
          key: strings[messageAt + 1],
          heldWith: n[i + SLOT_REQUEST],
          limit: n[i + SLOT_STORE],
        });
      }
      return sink.settledEffect(exec, {
        outcome: 'error',
        code: ERROR_CODES[n[i + SLOT_B]],
        message: strings[messageAt],
        // The key follows the message; empty when the error names none.
        key: strings[messageAt + 1] || undefined,
        // For a store's failure: the method that failed, in the store slot.
        method: METHODS[n[i + SLOT_STORE]],
        cause: n[i + SLOT_REQUEST],
      });
    }
    case EFFECT_EXTENDED:
      return sink.extendedEffect(exec, n[i + SLOT_A] === 1);
    case EFFECT_WATCH:
      return sink.watchEffect({ store: n[i + SLOT_STORE], watch: n[i + SLOT_A] === 1, key: strings[n[i + SLOT_C]] });
    case EFFECT_EVENT: {
      // The store slot holds the index of a failure's message, or -1.
      const messageAt = n[i + SLOT_STORE];
      const outcome = n[i + SLOT_A];
      // A renewal's lag rides in the waited slot, a loss's refusal in the token's.
      return sink.eventEffect(exec, {
        outcome: EVENTS[outcome],
        layer: n[i + SLOT_LAYER],
        waited: outcome === EVENT_RENEWED ? 0 : n[i + SLOT_B],
        lag: outcome === EVENT_RENEWED ? n[i + SLOT_B] : 0,
        token: outcome === EVENT_LOST ? 0 : n[i + SLOT_C],
        refused: outcome === EVENT_LOST && n[i + SLOT_C] === 1,
        cause: n[i + SLOT_REQUEST],
        message: messageAt >= 0 ? strings[messageAt] : undefined,
      });
    }
    default:
      return undefined;
  }
}

/** The kind of the effect at `n[i]` and its method or outcome as text, for checks ("call acquire", "run"). */
function describeEffect(n, i) {
  const kind = n[i + SLOT_KIND];
  if (kind === EFFECT_CALL) return `call ${METHODS[n[i + SLOT_A]]}`;
  if (kind === EFFECT_SETTLED) return `settled ${OUTCOMES[n[i + SLOT_A]]}`;
  return KINDS[kind] ?? `kind ${kind}`;
}

/** The execution an effect at `n[i]` is for, and (a `run`) its token: for checks. */
function effectExec(n, i) {
  return n[i + SLOT_EXEC];
}
function runToken(n, i) {
  return n[i + SLOT_B];
}

module.exports = {
  STATUS_EFFECTS,
  STATUS_TIMER_REF,
  STATUS_TIMER_UNREF,
  STATUS_TIMER_ARM,
  STATUS_HOST_BITS,
  statusOf,
  payloadOf,
  resultOf,
  STARTED_RUNNING,
  STARTED_STORE_CALL,
  STARTED_STORE_CALL_QUEUED,
  FINISHED_VALUE,
  FINISHED_CALLBACK_ERROR,
  FINISHED_LOST,
  FINISHED_NOT_HELD,
  finishSettlement,
  finishHandsOff,
  finishCallsStore,
  ANSWERED_RUNNING,
  ANSWERED_VALUE,
  ANSWERED_CALLBACK_ERROR,
  ANSWERED_NOT_HELD,
  settledByAnswer,
  GRANT_CLAIMED,
  EXTENDED,
  NOT_EXTENDED,
  MEMORY_RELEASED,
  OPTION_RENEW,
  OPTION_TELEMETRY,
  OPTION_MANUAL,
  OPTION_DIRECT,
  STORE_MEMORY,
  STORE_POLLED,
  STORE_ANNOUNCING,
  STORE_GRANTING,
  LOCK_LINGER_UNIT,
  SHARED_LIMIT,
  ERROR_LIMIT_MISMATCH,
  EFFECT_WIDTH,
  EFFECT_FIRST,
  stringCount,
  decodeEffect,
  describeEffect,
  effectExec,
  runToken,
};
