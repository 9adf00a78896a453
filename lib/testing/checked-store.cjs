'use strict';
// The store under test as the kit calls it: every call bounded in time, every answer
// held to the shapes the engine accepts (lib/host/store-calls.cjs, `answer`; `{ limit }`
// included), so that a store the engine would refuse fails here with the same words.

// Taken at load: a test that installs fake timers later must not stop the kit's bounds.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

/** The error a broken contract fails a case with; its message says what was broken. */
class StoreContractError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'StoreContractError';
  }
}

/** Throws a StoreContractError with `message` unless `ok`. */
function expect(ok, message) {
  if (!ok) throw new StoreContractError(typeof message === 'function' ? message() : message);
}

/** A value as a message shows it: strings quoted, objects as JSON where they can be. */
function show(value) {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value !== null && typeof value === 'object') {
    try {
      return JSON.stringify(value);
    } catch {
      return 'an object';
    }
  }
  return String(value);
}

/** A store call as a message names it: `acquire("k", "o", 1000)`. */
function callName(method, args) {
  return `${method}(${args.map(show).join(', ')})`;
}

/** Resolves to what `promise` does, or fails the case when it takes longer than `ms`. */
function within(ms, what, promise) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = realSetTimeout(() => reject(new StoreContractError(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => realClearTimeout(timer));
}

/** Sleeps `ms` of real time (the kit's waits on stores that keep their own clock). */
function sleep(ms) {
  return new Promise((resolve) => realSetTimeout(resolve, ms));
}

const isToken = (value) => Number.isSafeInteger(value) && value >= 0;

/** The limit of a key used with `mode` (lib/common/permits.cjs): the largest limit there is. */
const SHARED_LIMIT = 2147483647;
const isLimit = (value) => Number.isSafeInteger(value) && value >= 1 && value <= SHARED_LIMIT;

/**
 * Wraps `store`: `acquire`, `renew`, `release` call it with the arguments given and check
 * the answer; `call(method, ...args)` calls it unchecked (for bad input), answering
 * `{ value }` or `{ error }`. `bound` is the longest any one call may take.
 */
function checkedStore(store, bound) {
  async function invoke(method, args) {
    const name = callName(method, args);
    let pending;
    try {
      pending = store[method](...args);
    } catch (error) {
      return { name, error };
    }
    try {
      return { name, value: await within(bound, name, Promise.resolve(pending)) };
    } catch (error) {
      if (error instanceof StoreContractError) throw error;
      return { name, error };
    }
  }
  async function answered(method, args) {
    const { name, value, error } = await invoke(method, args);
    if (error !== undefined) {
      throw new StoreContractError(`${name} failed: ${error && error.message ? error.message : show(error)}`, { cause: error });
    }
    return { name, value };
  }
  /**
   * What acquire answered, its shape checked: `{ token }` (granted), `{ limit }` (the
   * key is held with another limit: permits) or `{}` (held).
   */
  async function acquireAnswer(...args) {
    const { name, value } = await answered('acquire', args);
    if (value === undefined || value === null) return { name };
    const token = typeof value === 'object' ? value.fencingToken : undefined;
    if (isToken(token)) return { name, token };
    const limit = token === undefined && typeof value === 'object' ? value.limit : undefined;
    if (isLimit(limit)) return { name, limit };
    throw new StoreContractError(
      `${name} resolved to ${show(value)}: acquire must resolve to { fencingToken: <non-negative safe integer> } or undefined` +
        (limit === undefined ? '' : ` (or { limit: <the key's limit, 1 to ${SHARED_LIMIT}> } to a try with another limit)`),
    );
  }
  return {
    store,
    call: (method, ...args) => invoke(method, args),
    answer: acquireAnswer,
    /** The lease's token, or undefined when the key is held. */
    async acquire(...args) {
      const { name, token, limit } = await acquireAnswer(...args);
      expect(limit === undefined, () => `${name} resolved to { limit: ${limit} }, the answer to a try whose limit is not the key's: this try asks for the key's limit (a plain try is limit 1)`);
      return token;
    },
    async renew(...args) {
      const { name, value } = await answered('renew', args);
      expect(typeof value === 'boolean', () => `${name} resolved to ${show(value)}: renew must resolve to a boolean`);
      return value;
    },
    /** true or false when the store tells; anything else is read as "cannot tell", as the engine does. */
    async release(...args) {
      const { value } = await answered('release', args);
      return typeof value === 'boolean' ? value : undefined;
    },
  };
}

module.exports = { StoreContractError, checkedStore, expect, show, callName, within, sleep, isToken, SHARED_LIMIT };
