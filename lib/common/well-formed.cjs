'use strict';
const { describe } = require('./describe.cjs');
// Keys (and owners) must be well-formed UTF-16. Both engines, `pg` and Buffer turn a lone
// surrogate into U+FFFD: two keys that differ only there would share one lock, and a
// store would see text other than what the caller wrote.

// In unicode mode a surrogate pair is one code point, outside this range: only a lone
// surrogate matches.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (text) => text.isWellFormed()
    : (text) => !LONE_SURROGATE.test(text);

/** Throws a TypeError that names `arg` when `text` has a lone surrogate. */
function checkWellFormed(text, arg) {
  if (isWellFormed(text)) return;
  // `describe` escapes the surrogate: printed as is, it would show as U+FFFD and hide the fault.
  const at = text.search(LONE_SURROGATE);
  throw new TypeError(`${arg} must be well-formed UTF-16 (a lone surrogate at index ${at}), got ${describe(text)}`);
}

module.exports = { checkWellFormed };
