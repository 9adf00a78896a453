'use strict';
/**
 * A store that cannot be woken on release says so once, as a process warning (Node's
 * 'warning' event: printed unless the application listens for it), instead of leaving
 * its waiters to poll silently. Once per store: a warning per wait would flood the log.
 */

const warned = new WeakSet();

/** Emits `message` as a LeaseholdWarning with `code`, the first time for `store`. */
function warnPollingOnce(store, code, message) {
  if (warned.has(store)) return;
  warned.add(store);
  const emit = globalThis.process?.emitWarning;
  if (typeof emit === 'function') emit.call(globalThis.process, message, { type: 'LeaseholdWarning', code });
}

module.exports = { warnPollingOnce };
