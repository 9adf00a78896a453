'use strict';
// How a callback is started: in a promise job made where execute() was called (so in the
// caller's async context), under the lock's ambient context or not (`ambientToken`), and
// from a fresh stack when executions nest too deep.

/*
 * Executions started inside one another synchronously (a callback, a store or a
 * telemetry listener that starts one, which starts one...): how deep the JS stack
 * holds them now. Past MAX_SYNC_NESTING the next one starts from a microtask, on a
 * fresh stack: the stack must not run out inside an engine call, where the wasm
 * engine would be left borrowed and unusable for every later lock on its clock.
 */
const MAX_SYNC_NESTING = 64;
/**
 * `nested(start, self, a, b)`: runs `start.call(self, a, b)` now, or from a microtask when
 * the stack is deep (one per API).
 */
function createNesting() {
  let nesting = 0;
  return function nested(start, self, a, b) {
    if (nesting >= MAX_SYNC_NESTING) return Promise.resolve().then(() => nested(start, self, a, b));
    nesting += 1;
    try {
      return start.call(self, a, b);
    } finally {
      nesting -= 1;
    }
  };
}

/**
 * Runs `callback(context)`, the code under `context`'s locks, and returns what it returns
 * (throws what it throws). Where `pipeline.ambientToken` holds (the default), the context
 * is ambient while it runs: `api.ambient` (an AsyncLocalStorage) carries it across
 * `await`, `api.syncContext` through the synchronous part. Otherwise the callback runs
 * under no ambient context, not even an enclosing lock's, and AsyncLocalStorage is not
 * run unless an enclosing lock's context is there to hide: where it has no
 * AsyncContextFrame (Node 20, Node 22 without its flag), its first `run` turns promise
 * hooks on for the whole process. `ownJob`: this is a promise job made for this callback
 * alone, where execute() was called (the fast path's, `FastPath#schedule`).
 */
function runCallback(api, pipeline, context, callback, ownJob) {
  const previous = api.syncContext;
  const ambient = api.ambient;
  if (pipeline.ambientToken) {
    api.syncContext = context;
    try {
      if (ambient === undefined) return callback(context);
      // In a promise job of its own, on AsyncContextFrame, the context is entered and
      // not left: the job's end leaves it, and leaving costs a second frame.
      if (ownJob && api.enterInJob) {
        ambient.enterWith(context);
        return callback(context);
      }
      return ambient.run(context, callback, context);
    } finally {
      api.syncContext = previous;
    }
  }
  api.syncContext = undefined;
  try {
    const enclosing = ambient !== undefined && ambient.getStore() !== undefined;
    return enclosing ? ambient.run(undefined, callback, context) : callback(context);
  } finally {
    api.syncContext = previous;
  }
}

/** Runs `rec`'s callback from the promise job made for it; a host failure fails it. */
function startInJob(rec, token) {
  try {
    rec.run(token, true);
  } catch (error) {
    rec.fail(error);
  }
}

module.exports = { createNesting, runCallback, startInJob };
