'use strict';
// The error classes users `instanceof`. Built once here, for every engine, and keyed on
// the stable `code` that the Rust core gives each failure.

/** The lock stayed held for longer than `wait`; the callback never ran. */
class LockNotAcquiredError extends Error {
  constructor(key, message = `lock '${key}' is held by another owner`, options) {
    super(message, options);
    this.name = 'LockNotAcquiredError';
    this.code = 'LOCK_NOT_ACQUIRED';
    this.key = key;
    this.httpStatus = 409;
  }
}

/**
 * The lease was lost while the callback ran (also the abort reason of its signal), or, in
 * a pipeline of several locks, an outer lease before the callback started.
 */
class LockLostError extends Error {
  constructor(key, message = `lease on lock '${key}' was lost while the callback ran`, options) {
    super(message, options);
    this.name = 'LockLostError';
    this.code = 'LOCK_LOST';
    this.key = key;
  }
}

/** The store failed; `cause` is what the store threw, unchanged. */
class LockStoreError extends Error {
  constructor(key, method, message, options) {
    super(message ?? `lock store failed on ${method}('${key}')`, options);
    this.name = 'LockStoreError';
    this.code = 'LOCK_STORE_FAILED';
    this.key = key;
    this.method = method;
    if (!options || !('cause' in options)) this.cause = undefined;
  }
}

/**
 * The key is held (or waited for) with another limit than the lock's: permits of
 * different limits never share a key, and a plain lock is a limit of 1. `limit` is the
 * lock's, `heldWith` the key's (2147483647: a key used with `mode`).
 */
class LockLimitMismatchError extends Error {
  constructor(key, limit, heldWith, message = `lock '${key}' is used with limit ${heldWith} by its holders; this lock asks for limit ${limit}`) {
    super(message);
    this.name = 'LockLimitMismatchError';
    this.code = 'LOCK_LIMIT_MISMATCH';
    this.key = key;
    this.limit = limit;
    this.heldWith = heldWith;
  }
}

/** True for errors that mean "not now, someone else has it" rather than a fault. */
function isRejection(error) {
  return error instanceof LockNotAcquiredError;
}

/**
 * An error thrown by an engine call (argument errors, a caught panic) as JS users expect
 * it. `takePanic`, where the engine has one (wasm), gives the message of the panic behind
 * a trap, which itself says only "unreachable".
 */
function fromEngine(error, takePanic) {
  if (!error || typeof error !== 'object') return new Error(String(error));
  // Already converted (an error passed through twice).
  if (error.code === 'LEASEHOLD_ENGINE_FAILURE' || error instanceof TypeError || error instanceof RangeError) {
    return error;
  }
  switch (error.code) {
    case 'ERR_INVALID_ARG_TYPE': {
      const e = new TypeError(error.message);
      e.code = error.code;
      return e;
    }
    case 'ERR_OUT_OF_RANGE': {
      const e = new RangeError(error.message);
      e.code = error.code;
      return e;
    }
    default: {
      // A Rust panic caught at the boundary (napi) or a wasm trap: an Error, never a crash.
      const trap = typeof WebAssembly === 'object' && error instanceof WebAssembly.RuntimeError;
      let panic;
      try {
        panic = trap ? takePanic?.() : undefined;
      } catch {
        // The instance that trapped may not answer any more: its trap's own text it is.
      }
      const e = new Error(`leasehold engine failure: ${panic ?? error.message}`, { cause: error });
      e.code = 'LEASEHOLD_ENGINE_FAILURE';
      return e;
    }
  }
}

module.exports = { LockNotAcquiredError, LockLostError, LockStoreError, LockLimitMismatchError, isRejection, fromEngine };
