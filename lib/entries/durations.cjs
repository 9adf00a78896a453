'use strict';
// Durations checked in JavaScript, for the wasm engine: its module leaves out the core's
// duration parser (a smaller download), and the browser entry checks durations before
// its module has loaded (addLock checks ttl and wait at once, at module load too). It
// answers exactly as the core does (core/src/duration.rs through host::duration_arg, the
// native addon's checkDuration): same milliseconds, same errors, same messages.
// js-tests/wasm-init.test.mjs compares the two on generated input.

/** The longest lease or wait: 2^31 − 1 ms, the longest delay of one JavaScript timer. */
const MAX_DURATION_MS = 2147483647;
/** Fraction digits a duration string's numbers keep exactly; later ones only round up. */
const FRACTION_DIGITS = 18;
const SCALE = 10n ** BigInt(FRACTION_DIGITS);
/** The engine's arithmetic saturates at the largest u128. */
const U128_MAX = (1n << 128n) - 1n;
const saturate = (n) => (n > U128_MAX ? U128_MAX : n);

function argError(ErrorClass, code, message) {
  const error = new ErrorClass(message);
  error.code = code;
  return error;
}
const rangeError = (message) => argError(RangeError, 'ERR_OUT_OF_RANGE', message);
const typeError = (message) => argError(TypeError, 'ERR_INVALID_ARG_TYPE', message);

/** Milliseconds as the engine's messages show them: at most three decimals, short when huge. */
function show(ms) {
  const abs = Math.abs(ms);
  const sign = ms < 0 && Math.round(abs * 1000) >= 1 ? '-' : '';
  if (abs === Infinity) return `${sign}Infinity`;
  if (abs >= 1e15) return `${sign}more than 10^15`;
  const thousandths = BigInt(Number.isNaN(abs) ? 0 : Math.round(abs * 1000));
  const whole = thousandths / 1000n;
  const fraction = thousandths % 1000n;
  if (fraction === 0n) return `${sign}${whole}`;
  return `${sign}${whole}.${String(fraction).padStart(3, '0').replace(/0+$/, '')}`;
}

/** User text in a message: quoted, cut after 40 characters. */
function quote(text) {
  const chars = [...text];
  return chars.length > 40 ? `'${chars.slice(0, 40).join('')}…' (${chars.length} characters)` : `'${text}'`;
}

const tooLong = (ms, arg) => rangeError(`${arg} must be at most ${MAX_DURATION_MS} ms (about 24.8 days), got ${show(ms)}`);

/** Digits with at most one dot: { value in 10^-18 units, cut }; undefined otherwise. */
function decimal(text) {
  const dot = text.indexOf('.');
  const whole = dot < 0 ? text : text.slice(0, dot);
  const fraction = dot < 0 ? '' : text.slice(dot + 1);
  if ((whole === '' && fraction === '') || fraction.includes('.')) return undefined;
  const kept = fraction.slice(0, FRACTION_DIGITS);
  const cut = /[1-9]/.test(fraction.slice(FRACTION_DIGITS));
  const value = BigInt(whole + kept.padEnd(FRACTION_DIGITS, '0') || '0');
  return { value: saturate(value), cut };
}

const UNITS = [
  { name: 'ms', ms: 1n, rank: 0 },
  { name: 's', ms: 1000n, rank: 1 },
  { name: 'm', ms: 60000n, rank: 2 },
  { name: 'h', ms: 3600000n, rank: 3 },
];

/** Whole numbers of units, largest first (`30s`, `1m30s`): exact in doubles. */
const WHOLE_UNITS = /^(?:(\d{1,9})h)?(?:(\d{1,9})m(?!s))?(?:(\d{1,9})s)?(?:(\d{1,9})ms)?$/;

function parse(text, arg) {
  const whole = text !== '' && WHOLE_UNITS.exec(text);
  if (whole) {
    const [, h = 0, m = 0, s = 0, ms = 0] = whole;
    const millis = h * 3600000 + m * 60000 + s * 1000 + Number(ms);
    if (millis <= MAX_DURATION_MS) return millis;
  }
  const unparsable = () =>
    typeError(`${arg} must be milliseconds or a duration string like '250ms', '30s', '5m', '1h' or '1m30s', got ${quote(text)}`);
  if (text === '') throw unparsable();
  let total = 0n;
  let cut = false;
  let lastRank = Infinity;
  let i = 0;
  while (i < text.length) {
    const start = i;
    while (i < text.length && /[0-9.]/.test(text[i])) i++;
    const number = decimal(text.slice(start, i));
    if (!number) throw unparsable();
    // 'ms' before 'm': the first unit whose name the text continues with.
    const unit = UNITS.find((u) => text.startsWith(u.name, i));
    // Largest unit first, each once: `1m30s`, not `30s1m`.
    if (!unit || unit.rank >= lastRank) throw unparsable();
    lastRank = unit.rank;
    i += unit.name.length;
    total = saturate(total + saturate(number.value * unit.ms));
    cut ||= number.cut;
  }
  // Rounded up, as milliseconds are: a positive duration never becomes zero.
  const millis = total / SCALE + (cut || total % SCALE !== 0n ? 1n : 0n);
  if (millis > BigInt(MAX_DURATION_MS)) throw tooLong(Number(total) / Number(SCALE), arg);
  return Number(millis);
}

/**
 * The engine's `checkDuration(ms, text, arg, infiniteOk)`: milliseconds, or -1 for
 * `Infinity` where `infiniteOk`. Throws a TypeError or RangeError naming `arg`.
 */
function checkDuration(ms, text, arg, infiniteOk) {
  if (ms !== undefined) {
    if (ms === Infinity && infiniteOk) return -1;
    if (Number.isNaN(ms)) throw rangeError(`${arg} must be a number of milliseconds, got NaN`);
    if (ms < 0) throw rangeError(`${arg} must not be negative, got ${show(ms)}`);
    if (ms > MAX_DURATION_MS) throw tooLong(ms, arg);
    return Math.ceil(ms) + 0;
  }
  if (text !== undefined) return parse(text, arg);
  throw typeError(`${arg} must be a number or a string`);
}

module.exports = { checkDuration };
