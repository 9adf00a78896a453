'use strict';
// Turns the engine's telemetry events for a pipeline's executions into OpenTelemetry
// metrics and spans. Only loaded and used where `@opentelemetry/api` resolved and a
// meter or tracer provider is registered (lib/otel/detect.cjs); an execution reports
// here only what the engine told (waits, renewals and their lag come from the engine's
// clock; a hold is timed on that same clock).

const { SCOPE, ATTR, createInstruments } = require('./instruments.cjs');
// The instrumentation scope's version: this package's.
const { version: VERSION } = require('../../package.json');

// What an acquire ended in, as `leasehold.lock.outcome`.
const ACQUIRED = 'acquired';
const BUSY = 'busy';
const TIMED_OUT = 'timed_out';
const ABORTED = 'aborted';
const STORE_ERROR = 'store_error';

// Instruments are made once per meter (a registered provider hands out one meter per name).
const instrumentsByMeter = new WeakMap();

/** `leasehold.store.kind` of a store: `memory`, `redis`, `postgres`, ... from its class name; `custom` for a plain object. */
function storeKind(store) {
  const name = store?.constructor?.name;
  if (typeof name !== 'string' || name === 'Object' || name === '') return 'custom';
  const kind = name.replace(/LockStore$/, '').replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
  return kind === '' ? 'custom' : kind;
}

/**
 * The attribute sets one lock records under, made once (`key`: with the key, for one
 * execution): each `{ attributes, id }`, the id naming the set across pipelines (withLock
 * builds one per call) for the counts kept in lib/otel/instruments.cjs.
 */
function attributeSets(lock, key) {
  const base = { [ATTR.STORE_KIND]: storeKind(lock.store), [ATTR.LOCK_NAME]: lock.name, [ATTR.LOCK_MODE]: lock.mode ?? 'exclusive' };
  if (key !== undefined) base[ATTR.LOCK_KEY] = key;
  const set = (attributes) => Object.freeze({ attributes: Object.freeze(attributes), id: JSON.stringify(Object.entries(attributes)) });
  const withAttr = (name, values) => Object.fromEntries(values.map((value) => [value, set({ ...base, [name]: value })]));
  return {
    base: set(base),
    acquire: withAttr(ATTR.ACQUIRE_OUTCOME, [ACQUIRED, BUSY, TIMED_OUT, ABORTED, STORE_ERROR]),
    end: withAttr(ATTR.LEASE_END, ['released', 'release_failed', 'lost']),
    renewal: withAttr(ATTR.RENEWAL_OUTCOME, ['renewed', 'failed', 'refused']),
    loss: withAttr(ATTR.LOSS_REASON, ['refused', 'expired']),
  };
}

/** The span name of a lock: `lock <name>` (`lock` for one left unnamed). */
function spanName(lock) {
  return lock.name === 'lock' ? 'lock' : `lock ${lock.name}`;
}

/**
 * What one pipeline records with: made at build, when OpenTelemetry is on. `otel`: the
 * `@opentelemetry/api` module; `options.key`: the lock key is an attribute too; `spans`:
 * a tracer provider is registered (without one, no span is started at all).
 */
class PipelineTelemetry {
  constructor(otel, locks, options, spans) {
    this.otel = otel;
    const meter = otel.metrics.getMeter(SCOPE, VERSION);
    let instruments = instrumentsByMeter.get(meter);
    if (instruments === undefined) {
      instruments = createInstruments(meter);
      instrumentsByMeter.set(meter, instruments);
    }
    this.instruments = instruments;
    this.tracer = spans ? otel.trace.getTracer(SCOPE, VERSION) : undefined;
    this.locks = locks;
    this.withKey = options.key === true;
    // Without keys, one lock's attribute sets serve every execution.
    this.attributes = this.withKey ? undefined : locks.map((lock) => attributeSets(lock, undefined));
    this.spanNames = locks.map(spanName);
  }

  /** Starts recording an execution begun now, in its caller's context, on `keys`. */
  begin(keys) {
    try {
      return new ExecutionTelemetry(this, keys);
    } catch {
      return undefined; // a tracer that fails to start a span: telemetry never breaks a lock
    }
  }
}

/** One execution's spans (one per lock, the first a child of the caller's active span) and hold times. */
class ExecutionTelemetry {
  constructor(pipeline, keys) {
    this.pipeline = pipeline;
    this.attributes = pipeline.attributes ?? pipeline.locks.map((lock, i) => attributeSets(lock, keys[i]));
    const n = pipeline.locks.length;
    this.spans = new Array(n);
    this.acquiredAt = new Array(n).fill(-1);
    this.parent = undefined;
    if (pipeline.tracer === undefined) return;
    this.parent = pipeline.otel.context.active();
    this.startSpan(0, this.parent);
  }

  // Spans keep the tracer's own (real) time; metrics the engine's, fake or not.
  startSpan(layer, parent) {
    const { tracer, otel, spanNames } = this.pipeline;
    this.spans[layer] = tracer.startSpan(
      spanNames[layer],
      { kind: otel.SpanKind.INTERNAL, attributes: this.attributes[layer].base.attributes },
      parent,
    );
  }

  /** An engine event for lock `fx.layer` (lib/host/protocol.cjs `eventEffect`), at engine time `now` (ms). */
  event(fx, now) {
    const layer = fx.layer;
    const attrs = this.attributes[layer];
    const m = this.pipeline.instruments;
    const span = this.spans[layer];
    switch (fx.outcome) {
      case 'acquired': {
        this.acquired(ACQUIRED, fx.waited, attrs);
        m.held.add(1, attrs.base);
        this.acquiredAt[layer] = now;
        if (span !== undefined) {
          span.setAttribute(ATTR.FENCING_TOKEN, fx.token);
          span.addEvent('acquired', { [ATTR.FENCING_TOKEN]: fx.token });
        }
        // The next lock is acquired from now on, under this one.
        if (span !== undefined && layer + 1 < this.spans.length) {
          this.startSpan(layer + 1, this.pipeline.otel.trace.setSpan(this.parent, span));
        }
        return;
      }
      case 'rejected':
        return this.notAcquired(layer, this.pipeline.locks[layer].waitMs === 0 ? BUSY : TIMED_OUT, fx.waited);
      case 'acquireFailed':
        return this.notAcquired(layer, STORE_ERROR, fx.waited);
      case 'cancelled':
        return this.notAcquired(layer, ABORTED, fx.waited);
      case 'renewed':
        m.renewals.add(1, attrs.renewal.renewed);
        m.renewalLag.record(fx.lag / 1000, attrs.base);
        return;
      case 'renewalFailed':
        m.renewals.add(1, attrs.renewal.failed);
        span?.addEvent('renewal failed', fx.message === undefined ? undefined : { 'exception.message': fx.message });
        return;
      case 'lost':
        if (fx.refused) m.renewals.add(1, attrs.renewal.refused);
        m.losses.add(1, fx.refused ? attrs.loss.refused : attrs.loss.expired);
        return this.endHold(layer, 'lost', now);
      case 'released':
        return this.endHold(layer, 'released', now);
      case 'releaseFailed':
        return this.endHold(layer, 'release_failed', now);
      default:
        return undefined;
    }
  }

  acquired(outcome, waitedMs, attrs) {
    const m = this.pipeline.instruments;
    m.acquisitions.add(1, attrs.acquire[outcome]);
    m.wait.record(waitedMs / 1000, attrs.acquire[outcome]);
  }

  notAcquired(layer, outcome, waitedMs) {
    this.acquired(outcome, waitedMs, this.attributes[layer]);
    const span = this.spans[layer];
    if (span === undefined) return;
    span.setAttributes({ [ATTR.ACQUIRE_OUTCOME]: outcome, [ATTR.ERROR_TYPE]: outcome });
    span.setStatus({ code: this.pipeline.otel.SpanStatusCode.ERROR, message: `lock not acquired: ${outcome}` });
    this.endSpan(layer);
  }

  endHold(layer, end, now) {
    const since = this.acquiredAt[layer];
    if (since < 0) return;
    this.acquiredAt[layer] = -1;
    const attrs = this.attributes[layer];
    const m = this.pipeline.instruments;
    m.hold.record((now - since) / 1000, attrs.end[end]);
    m.held.add(-1, attrs.base);
    const span = this.spans[layer];
    if (span === undefined) return;
    span.setAttribute(ATTR.LEASE_END, end);
    if (end === 'lost') {
      span.setAttribute(ATTR.ERROR_TYPE, 'lost');
      span.setStatus({ code: this.pipeline.otel.SpanStatusCode.ERROR, message: 'lease lost' });
    }
    this.endSpan(layer);
  }

  endSpan(layer) {
    const span = this.spans[layer];
    this.spans[layer] = undefined;
    span.end();
  }

  /** The execution settled: a lease still counted (its engine retired) stops counting, and open spans end. */
  settled() {
    for (let layer = 0; layer < this.spans.length; layer++) {
      if (this.acquiredAt[layer] >= 0) {
        this.acquiredAt[layer] = -1;
        this.pipeline.instruments.held.add(-1, this.attributes[layer].base);
      }
      if (this.spans[layer] === undefined) continue;
      try {
        this.endSpan(layer);
      } catch {
        // A span processor that throws: the other spans still end, and the lock settles.
      }
    }
  }
}

module.exports = { PipelineTelemetry, storeKind };
