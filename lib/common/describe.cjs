'use strict';
/**
 * A value as an error message shows it: a string quoted as JSON (so control characters
 * and lone surrogates show as escapes) and cut after 40 characters, anything else by its
 * kind or its text. One form for the host and both stores.
 */
function describe(value) {
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

/**
 * Refuses an options object that has a name no option has: a misspelled option (`wiat`,
 * `timeout` for `wait`) would otherwise be ignored in silence. Names it and the options.
 */
function checkOptionNames(options, known, what) {
  // for-in: no array per call (execute checks its options on every call).
  for (const name in options) {
    if (!known.includes(name) && Object.prototype.hasOwnProperty.call(options, name)) {
      throw new TypeError(`${what} has no option ${describe(name)}; its options are ${known.join(', ')}`);
    }
  }
}

module.exports = { describe, checkOptionNames };
