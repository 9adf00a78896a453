'use strict';
/**
 * `inspect` and `list` of `PostgresLockStore` (./index.cjs, whose top comment
 * describes the table): plain SELECTs, never a write, judged by the database clock.
 *
 * - `inspect(key)` reads the key's row by its digest (the primary key): the owner of a
 *   live lease, its token and the milliseconds left. The table keeps no queue for plain
 *   leases (waiters poll, or LISTEN for the release's NOTIFY): `waiters` is empty then.
 *   A key held with permits shows each live holder with its weight (and mode), the
 *   waiters whose place the row keeps (permit-statements.cjs) and the key's `limit`.
 * - `list({ prefix, limit })` walks the index `ensureSchema()` creates on the key's
 *   first HEAD characters (byte order, `COLLATE "C"`) and its digest, PAGE rows per
 *   statement, from where the last page ended (keyset pagination): each statement reads
 *   a bounded range of the index, restricted to the prefix's range, and the client
 *   holds one page at a time. Keys come in byte order of their first HEAD characters.
 *   (The index holds at most HEAD characters of a key because a btree entry holds at
 *   most about 2.7 kB; the prefix test on the whole key is made on each row.)
 */

const { permitsShown } = require('../shared/permits.cjs');

const PAGE = 500;
/** Characters of a key in the list index: at most 800 bytes of UTF-8. */
const HEAD = 200;

const head = `(left(key, ${HEAD}) COLLATE "C")`;

/** The index `list` walks, on `table` (quoted, schema-qualified) named `name` (unquoted). */
function listIndex(table, name) {
  return `CREATE INDEX IF NOT EXISTS "${name.replace(/"/g, '""')}" ON ${table} (${head}, key_digest)`;
}

/** The statements on `table` (quoted, schema-qualified). */
function inspectStatements(table) {
  const digest = `sha256(convert_to($1::text, 'UTF8'))`;
  const left = `ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8`;
  // $1, $2: where the last page ended (head, digest; the prefix's start and an empty
  // digest for the first page), $3 the prefix, $4 the page size, [$5 the end of the
  // prefix's range].
  const page = (bounded) => `SELECT key_digest, key, ${head} AS head FROM ${table}
WHERE (${head}, key_digest) > ($1::text COLLATE "C", $2::bytea)${bounded ? ` AND ${head} < ($5::text COLLATE "C")` : ''}
  AND starts_with(key, $3::text) AND (owner IS NOT NULL OR permits IS NOT NULL) AND expires_at > clock_timestamp()
ORDER BY ${head}, key_digest LIMIT $4::int`;
  return {
    inspect: `SELECT owner, token::text AS token, ${left} AS ms, permits,
  floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8 AS now
FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()`,
    list: page(false),
    listBounded: page(true),
  };
}

/**
 * The first string in byte order after every string that starts with `start`, or
 * `undefined` when none is (`start` empty or all U+10FFFF): `start` with its last code
 * point raised by one (past the surrogates, which text cannot hold).
 */
function rangeEnd(start) {
  const points = [...start];
  while (points.length > 0) {
    const cp = points.pop().codePointAt(0);
    if (cp < 0x10ffff) return points.join('') + String.fromCodePoint(cp + 1 === 0xd800 ? 0xe000 : cp + 1);
  }
  return undefined;
}

/**
 * A key held with permits (permit-statements.cjs describes `permits`), at `now` µs on the
 * database clock: its live holders, oldest grant first, with their weight (and mode);
 * its confirmed waiters, first first; its limit. `undefined` when none is live.
 */
function permitsInspection(key, permits, now) {
  if (permits == null) return undefined;
  const limit = Number(permits.l);
  const live = (part) => Object.entries(permits[part] ?? {}).filter(([, v]) => Number(v.e) > now);
  const holders = live('h')
    .sort(([, a], [, b]) => Number(a.t) - Number(b.t))
    .map(([owner, v]) => ({
      owner,
      fencingToken: Number(v.t),
      ttl: Math.max(1, Math.ceil((Number(v.e) - now) / 1000)),
      ...permitsShown(limit, Number(v.w)),
    }));
  const waiters = live('q')
    .filter(([, v]) => v.c === true)
    .sort(([ao, a], [bo, b]) => Number(a.q) - Number(b.q) || (ao < bo ? -1 : 1))
    .map(([owner, v]) => ({ owner, since: Math.floor(Number(v.q) / 1000) }));
  if (holders.length === 0 && waiters.length === 0) return undefined;
  return { key, holders, waiters, limit };
}

/** `inspect` and `list` for a store whose statements run with `query(text, values) -> rows`. */
function postgresInspector({ table, query }) {
  const sql = inspectStatements(table);
  return {
    async inspect(key) {
      const rows = await query(sql.inspect, [key], 'inspect');
      if (rows.length === 0) return undefined;
      const [row] = rows;
      if (row.owner === null) return permitsInspection(key, row.permits, Number(row.now));
      return {
        key,
        holders: [{ owner: row.owner, fencingToken: Number(row.token), ttl: Math.max(1, Number(row.ms)) }],
        waiters: [],
      };
    },
    async *list({ prefix, limit }) {
      const start = [...prefix].slice(0, HEAD).join('');
      const end = rangeEnd(start);
      let after = [start, Buffer.alloc(0)];
      let left = limit;
      while (left > 0) {
        const size = Math.min(PAGE, left);
        const values = [...after, prefix, size];
        const rows = await query(end === undefined ? sql.list : sql.listBounded, end === undefined ? values : [...values, end], 'list');
        for (const row of rows) yield row.key;
        left -= rows.length;
        if (rows.length < size) return;
        const last = rows[rows.length - 1];
        after = [last.head, last.key_digest];
      }
    },
  };
}

module.exports = { postgresInspector, listIndex, rangeEnd };
