/**
 * What the ES-module stores (`leasehold/tabs`, `leasehold/durable-object`) share: argument
 * checks with the messages the rest of the package uses, and the listeners a store that
 * grants on release offers its grants to. Plain ECMAScript: it loads in browsers, workers
 * and workerd without a bundler (lib/stores/shared/checks.cjs, the CommonJS stores' checks,
 * does not): its rules and messages are that file's, held together by
 * js-tests/store-checks.test.mjs.
 */

/** A value as an error message shows it: lib/common/describe.cjs's rule, for ES modules. */
export function describe(value) {
  switch (typeof value) {
    case 'string': {
      if (value.length <= 40) return JSON.stringify(value);
      // Not between the two halves of a surrogate pair: that would show a lone one.
      const cut = /[\uD800-\uDBFF]/.test(value[39]) && /[\uDC00-\uDFFF]/.test(value[40]) ? 39 : 40;
      return `${JSON.stringify(value.slice(0, cut)).slice(0, -1)}…" (${value.length} characters)`;
    }
    case 'bigint':
      return `${value}n (a bigint)`;
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    case 'object':
      if (value === null) return 'null';
      try {
        return Array.isArray(value) ? 'an array' : 'an object';
      } catch {
        return 'an object'; // a revoked proxy
      }
    default:
      return String(value);
  }
}

export function checkString(name, value) {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be a non-empty string, got ${describe(value)}`);
}

/**
 * A lease's length: whole milliseconds, the rule of lib/stores/shared/checks.cjs (the
 * engine only asks for whole ms; a fraction is a caller's mistake).
 */
export function checkTtl(value) {
  if (typeof value !== 'number') throw new TypeError(`ttlMs must be a number of milliseconds, got ${describe(value)}`);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`ttlMs must be a positive integer number of milliseconds, got ${describe(value)}`);
  }
}

/** `subscribe`'s listener. */
export function checkListener(onReleased) {
  if (typeof onReleased !== 'function') throw new TypeError(`onReleased must be a function, got ${describe(onReleased)}`);
}

/** A constructor's options: an object whose every name is one of `known`. */
export function checkOptions(options, known, what) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${what} options must be an object, got ${describe(options)}`);
  }
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) throw new TypeError(`${what} has no option ${describe(name)}; its options are ${known.join(', ')}`);
  }
}

// Permits: lib/stores/shared/permits.cjs's rules and messages, for the ES stores.

/** The limit of a key used with `mode`: a writer's weight, more than readers will ever be. */
export const SHARED_LIMIT = 2147483647;

/** `acquire`'s options, checked: `{ queue, limit, weight }` (see permits.cjs). */
export function acquireOptions(options) {
  if (options === undefined) return { queue: false, limit: undefined, weight: undefined };
  if (options === null || typeof options !== 'object' || (options.queue !== undefined && typeof options.queue !== 'boolean')) {
    throw new TypeError(`options must be an object like { queue: true }, got ${describe(options)}`);
  }
  const { limit, weight } = options;
  if (limit === undefined && weight === undefined) return { queue: options.queue === true, limit: undefined, weight: undefined };
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > SHARED_LIMIT) {
    throw new RangeError(`options.limit must be an integer from 1 to ${SHARED_LIMIT}, got ${describe(limit)}`);
  }
  if (!Number.isSafeInteger(weight) || weight < 1 || weight > limit) {
    throw new RangeError(`options.weight must be an integer from 1 to the limit (${limit}), got ${describe(weight)}`);
  }
  return { queue: options.queue === true, limit, weight };
}

/** How `inspect` shows a holder's permits: its weight, and its mode on a key used with modes. */
export function permitsShown(limit, weight) {
  if (limit !== SHARED_LIMIT) return { weight };
  return { weight, mode: weight === SHARED_LIMIT ? 'exclusive' : 'shared' };
}

/** The `subscribe` listeners of a store that grants on release, per key. */
export class GrantListeners {
  #byKey = new Map();

  /** Adds `onReleased` for `key`; returns a function that removes it (idempotent). */
  add(key, onReleased) {
    checkString('key', key);
    checkListener(onReleased);
    let entries = this.#byKey.get(key);
    if (entries === undefined) this.#byKey.set(key, (entries = new Set()));
    const entry = { onReleased };
    entries.add(entry);
    return () => {
      const current = this.#byKey.get(key);
      if (current?.delete(entry) && current.size === 0) this.#byKey.delete(key);
    };
  }

  /**
   * Offers `grant` (`{ owner, fencingToken, age }`) to the listeners of `key`, one at a
   * time, until one claims it (returns true). Returns whether one did; a listener that
   * throws does not claim, and the others are still asked.
   */
  offer(key, grant) {
    for (const entry of [...(this.#byKey.get(key) ?? [])]) {
      try {
        if (entry.onReleased(grant) === true) return true;
      } catch {
        // A listener's failure is its own.
      }
    }
    return false;
  }
}
