'use strict';
// The OpenTelemetry names leasehold records under, in one place: the meter's instruments
// (names, units and descriptions in the semantic conventions' style: dotted namespaces,
// seconds for durations, annotations in braces for counts) and the attribute names.

const SCOPE = 'leasehold';

const ATTR = {
  STORE_KIND: 'leasehold.store.kind',
  LOCK_NAME: 'leasehold.lock.name',
  LOCK_KEY: 'leasehold.lock.key',
  LOCK_MODE: 'leasehold.lock.mode',
  ACQUIRE_OUTCOME: 'leasehold.lock.outcome',
  FENCING_TOKEN: 'leasehold.lock.fencing_token',
  LEASE_END: 'leasehold.lease.end',
  LOSS_REASON: 'leasehold.loss.reason',
  RENEWAL_OUTCOME: 'leasehold.renewal.outcome',
  ERROR_TYPE: 'error.type',
};

// Bucket boundaries for durations in seconds, from 1 ms to a minute (the SDK's default
// boundaries are meant for milliseconds).
const SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The instruments of `meter`, made once per meter. Histograms are recorded as things
 * happen; counts are kept in plain numbers and read by the meter when it collects
 * (asynchronous counters), which spares an execution most of the SDK's per-recording
 * work. Each takes an attribute set `{ attributes, id }` (lib/otel/recorder.cjs).
 */
function createInstruments(meter) {
  const seconds = (description) => ({ unit: 's', description, advice: { explicitBucketBoundaries: SECONDS } });
  const histogram = (name, description) => {
    const h = meter.createHistogram(name, seconds(description));
    return { record: (value, set) => h.record(value, set.attributes) };
  };
  return {
    wait: histogram('leasehold.lock.wait.duration', 'Time from the first try for a lock to its outcome'),
    hold: histogram('leasehold.lock.hold.duration', 'Time a lease was held, from its grant to its release or loss'),
    renewalLag: histogram('leasehold.lease.renewal.lag', 'Time from when a renewal fell due to when the store confirmed it'),
    acquisitions: counts(meter.createObservableCounter('leasehold.lock.acquisitions', {
      unit: '{acquisition}',
      description: 'Attempts to acquire a lock, by outcome',
    })),
    renewals: counts(meter.createObservableCounter('leasehold.lease.renewals', { unit: '{renewal}', description: 'Lease renewals, by outcome' })),
    losses: counts(meter.createObservableCounter('leasehold.lease.losses', { unit: '{lease}', description: 'Leases lost while held' })),
    // A set of attributes back at 0 is reported once more, then forgotten: a lock that
    // came and went leaves nothing behind.
    held: counts(meter.createObservableUpDownCounter('leasehold.lease.count', { unit: '{lease}', description: 'Leases held now' }), true),
  };
}

/** Counts per attribute set, observed by `instrument` at each collection; `forgetZero`: drop a set once seen at 0. */
function counts(instrument, forgetZero = false) {
  const live = new Map(); // set id -> { attributes, count }
  instrument.addCallback((result) => {
    for (const [id, entry] of live) {
      result.observe(entry.count, entry.attributes);
      if (forgetZero && entry.count === 0) live.delete(id);
    }
  });
  return {
    add(by, set) {
      let entry = live.get(set.id);
      if (entry === undefined) {
        entry = { attributes: set.attributes, count: 0 };
        live.set(set.id, entry);
      }
      entry.count += by;
    },
  };
}

module.exports = { SCOPE, ATTR, createInstruments };
