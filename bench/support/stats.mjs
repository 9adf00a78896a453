// Small statistics and formatting helpers shared by the orchestrator and the children.

/** The median of a list of numbers (undefined for an empty list). */
export function median(values) {
  const xs = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (xs.length === 0) return undefined;
  const mid = xs.length >> 1;
  return xs.length % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

/** p50, p99 and max of `samples` (a typed array or an array), nearest rank. */
export function quantiles(samples, count = samples.length) {
  if (count === 0) return { p50: undefined, p99: undefined, max: undefined };
  const sorted = Float64Array.from(samples.subarray ? samples.subarray(0, count) : samples.slice(0, count)).sort();
  const at = (p) => sorted[Math.min(count - 1, Math.max(0, Math.ceil(p * count) - 1))];
  return { p50: at(0.5), p99: at(0.99), max: sorted[count - 1] };
}

/** Latencies between consecutive timestamps: for a sequential loop, one per operation. */
export function gaps(stamps, count) {
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) out[i] = stamps[i + 1] - stamps[i];
  return out;
}

export function fmtInt(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '–';
  return Math.round(x).toLocaleString('en-US');
}

/** Milliseconds shown as µs below 1 ms, else ms. */
export function fmtMs(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '–';
  if (ms < 1) return `${(ms * 1000).toFixed(ms < 0.01 ? 2 : 1)} µs`;
  if (ms < 100) return `${ms.toFixed(2)} ms`;
  return `${Math.round(ms)} ms`;
}

export function fmtRatio(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '–';
  return `${x.toFixed(2)}×`;
}

export function fmtBytes(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '–';
  return `${x.toFixed(1)} B`;
}
