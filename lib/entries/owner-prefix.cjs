'use strict';
// The readable start of every owner id a Node or Bun process draws:
// `<host>:<pid>:` (`<host>:<pid>.<thread>:` in a worker thread), then the engine's 32
// random hex digits. A person reading a store sees which machine and process holds a
// lease; the random part still makes each id unique. Nothing else of the process goes
// into it.

const os = require('node:os');

/** The host name as it goes into owner ids: at most 63 characters, no ':' or spaces. */
function readableHost(name) {
  return String(name).replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 63) || 'host';
}

function ownerPrefix() {
  let thread = 0;
  try {
    thread = require('node:worker_threads').threadId;
  } catch {
    // a runtime without worker threads
  }
  const host = readableHost(os.hostname());
  return thread ? `${host}:${process.pid}.${thread}:` : `${host}:${process.pid}:`;
}

module.exports = { ownerPrefix, readableHost };
