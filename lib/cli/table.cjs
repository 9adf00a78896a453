'use strict';
// What `leasehold inspect` prints: a table of keys (holder, token, time left, waiters),
// with, under `--watch`, what changed since the last frame highlighted.

const COLUMNS = ['KEY', 'HOLDER', 'TOKEN', 'LEFT', 'WAITERS'];

const STYLE = {
  changed: ['\x1b[1;33m', '\x1b[0m'], // bold yellow: a cell that changed
  added: ['\x1b[1;32m', '\x1b[0m'], // bold green: a key held since the last frame
  gone: ['\x1b[2;31m', '\x1b[0m'], // dim red: a key no longer held
  dim: ['\x1b[2m', '\x1b[0m'],
};

/** Milliseconds as a person reads them: 850ms, 12.3s, 4m05s. */
function duration(ms) {
  if (ms === Infinity) return 'no expiry';
  if (!Number.isFinite(ms)) return '?';
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.floor((ms % 60_000) / 1000);
  return minutes < 60 ? `${minutes}m${String(seconds).padStart(2, '0')}s` : `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}

/** One row's cells for an inspection (undefined: the key is free). */
function cells(key, inspection) {
  if (inspection === undefined) return { KEY: key, HOLDER: '(free)', TOKEN: '', LEFT: '', WAITERS: '' };
  const [holder] = inspection.holders;
  // A key held with permits has several holders: the first granted, and how many more.
  const more = inspection.holders.length > 1 ? ` +${inspection.holders.length - 1} more` : '';
  return {
    KEY: key,
    HOLDER: holder ? `${holder.owner}${more}` : '(between holders)',
    TOKEN: holder ? String(holder.fencingToken) : '',
    LEFT: holder ? duration(holder.ttl) : '',
    WAITERS: String(inspection.waiters.length),
    ttl: holder?.ttl,
  };
}

/**
 * Lines under a row: the holders of a key held with permits (each with its token, time
 * left and weight or mode), then its waiters in queue order, and since when each waits.
 */
function waiterLines(inspection, now) {
  const holders = inspection?.limit === undefined ? [] : inspection.holders;
  const held = holders.map((h) => {
    const permits = h.mode ?? `weight ${h.weight} of ${inspection.limit}`;
    return `    holds: ${h.owner}  token ${h.fencingToken}  ${duration(h.ttl)} left  ${permits}`;
  });
  const waiting = (inspection?.waiters ?? []).map((w, i) => {
    const since = w.since === undefined ? '' : `  waiting ${duration(now - w.since)}`;
    return `    ${i + 1}. ${w.owner}${since}`;
  });
  return [...held, ...waiting];
}

/**
 * The table of `entries` ([{ key, inspection }]) as text. `detail`: list each key's
 * waiters under it. `previous` (the last frame's cells by key) and `color`: highlight
 * what changed. Returns `{ text, frame }`, `frame` being the cells to compare next time.
 */
function render(entries, { detail = false, previous, color = false, now = Date.now() } = {}) {
  const paint = (style, text) => (color ? `${STYLE[style][0]}${text}${STYLE[style][1]}` : text);
  const frame = new Map();
  const rows = [];
  for (const { key, inspection } of entries) {
    const row = cells(key, inspection);
    frame.set(key, row);
    const before = previous?.get(key);
    const marks = {};
    if (previous !== undefined) {
      for (const column of COLUMNS) {
        if (before === undefined) marks[column] = 'added';
        else if (column === 'LEFT') marks[column] = row.ttl > (before.ttl ?? Infinity) ? 'changed' : undefined;
        else if (row[column] !== before[column]) marks[column] = 'changed';
      }
    }
    rows.push({ row, marks, extra: detail ? waiterLines(inspection, now) : [] });
  }
  for (const [key, before] of previous ?? []) {
    if (!frame.has(key)) rows.push({ row: { ...before, HOLDER: '(released)', TOKEN: '', LEFT: '', WAITERS: '' }, marks: Object.fromEntries(COLUMNS.map((c) => [c, 'gone'])), extra: [] });
  }
  const widths = COLUMNS.map((c) => Math.max(c.length, ...rows.map(({ row }) => row[c].length)));
  const line = (values, marks = {}) =>
    values
      .map((v, i) => {
        const padded = i === values.length - 1 ? v : v.padEnd(widths[i]);
        return marks[COLUMNS[i]] ? paint(marks[COLUMNS[i]], padded) : padded;
      })
      .join('  ')
      .trimEnd();
  const lines = [line(COLUMNS)];
  for (const { row, marks, extra } of rows) {
    lines.push(line(COLUMNS.map((c) => row[c]), marks));
    for (const e of extra) lines.push(paint('dim', e));
  }
  if (rows.length === 0) lines.push(paint('dim', '(no key held)'));
  return { text: lines.join('\n'), frame };
}

module.exports = { render, duration };
