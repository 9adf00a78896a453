'use strict';
/**
 * A PostgresLockStore behind a transaction-mode pooler that has no direct connection to
 * LISTEN on says so once, as a process warning (Node's 'warning' event: printed unless
 * the application listens for it), instead of leaving its waiters to poll silently.
 * Once per store: a warning per wait would flood the log.
 */

const warned = new WeakSet();

/** Warns, the first time for `store`, that its waiters poll because of `why`. */
function warnPollingOnce(store, why) {
  if (warned.has(store)) return;
  warned.add(store);
  const emit = globalThis.process?.emitWarning;
  if (typeof emit !== 'function') return;
  emit.call(
    globalThis.process,
    `PostgresLockStore (transactionPooling) cannot LISTEN because ${why}: waiters poll instead of being woken on release. ` +
      'Pass listenClient, a pg Client connected to PostgreSQL directly (not through the pooler).',
    { type: 'LeaseholdWarning', code: 'LEASEHOLD_POLLING' },
  );
}

module.exports = { warnPollingOnce };
