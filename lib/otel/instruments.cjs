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

/** The instruments of `meter`, made once per meter. */
function createInstruments(meter) {
  const seconds = (description) => ({ unit: 's', description, advice: { explicitBucketBoundaries: SECONDS } });
  return {
    wait: meter.createHistogram('leasehold.lock.wait.duration', seconds('Time from the first try for a lock to its outcome')),
    hold: meter.createHistogram('leasehold.lock.hold.duration', seconds('Time a lease was held, from its grant to its release or loss')),
    acquisitions: meter.createCounter('leasehold.lock.acquisitions', {
      unit: '{acquisition}',
      description: 'Attempts to acquire a lock, by outcome',
    }),
    losses: meter.createCounter('leasehold.lease.losses', { unit: '{lease}', description: 'Leases lost while held' }),
    renewals: meter.createCounter('leasehold.lease.renewals', { unit: '{renewal}', description: 'Lease renewals, by outcome' }),
    renewalLag: meter.createHistogram(
      'leasehold.lease.renewal.lag',
      seconds('Time from when a renewal fell due to when the store confirmed it'),
    ),
    held: meter.createUpDownCounter('leasehold.lease.count', { unit: '{lease}', description: 'Leases held now' }),
  };
}

module.exports = { SCOPE, ATTR, createInstruments };
