'use strict';
// The SQL of a PostgresLockStore: the table, and one statement per store method. Why each
// statement keeps the promises at the top of index.cjs is said above it.

/** `"name"`, with inner quotes doubled: safe for any text. */
function quoteIdentifier(name) {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The SQL of a store on `table` (already quoted and qualified). */
function statements(table, notify) {
  // The row's key: sha256 of the key's UTF-8 bytes (see the table at the top).
  const digest = `sha256(convert_to($1::text, 'UTF8'))`;

  /*
   * ACQUIRE. $1 key, $2 owner, $3 ttl ms.
   * Free means "no row, or a row whose expires_at has passed" by the database clock.
   * The row's lock (ON CONFLICT DO UPDATE locks the conflicting row and re-checks the
   * WHERE on its latest version) makes the check and the take atomic.
   * token = greatest(stored token + 1, database time in microseconds). The stored
   * token keeps the sequence strictly increasing per key, whatever the clock does; the
   * time keeps it increasing when the row is gone (pruned, truncated, restored from an
   * older backup). Microseconds stay below 2^53 until the year 2255: exact as a JS number.
   */
  const acquire = `WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO ${table} AS l (key_digest, key, owner, expires_at, token)
SELECT ${digest}, $1::text, $2::text, t + $3::float8 * interval '1 millisecond', floor(extract(epoch FROM t) * 1000000)::bigint FROM now
ON CONFLICT (key_digest) DO UPDATE
  SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, token = greatest(l.token + 1, EXCLUDED.token)
  WHERE l.expires_at <= clock_timestamp()
RETURNING l.token::text AS token`;

  /*
   * RENEW. $1 key, $2 owner, $3 ttl ms, $4 the holder's token (0 when none is carried).
   * Only the owner's live lease. The carried token raises the key's token: the next
   * grant (stored token + 1) is larger than every token the holder's process handed
   * over locally.
   */
  const renew = `UPDATE ${table}
SET expires_at = clock_timestamp() + $3::float8 * interval '1 millisecond', token = greatest(token, $4::bigint)
WHERE key_digest = ${digest} AND owner = $2::text AND expires_at > clock_timestamp()
RETURNING 1 AS renewed`;

  /*
   * RELEASE. $1 key, $2 owner, $3 the holder's token (as in RENEW), [$4 channel]. Only
   * the owner's live lease; the row and its token stay. The NOTIFY is sent at commit,
   * only when a lease was released.
   */
  const update = `UPDATE ${table}
  SET owner = NULL, expires_at = clock_timestamp(), token = greatest(token, $3::bigint)
  WHERE key_digest = ${digest} AND owner = $2::text AND expires_at > clock_timestamp()
  RETURNING 1`;
  const release = notify
    ? `WITH released AS (\n  ${update}\n)\nSELECT 1 AS released, pg_notify($4::text, '') FROM released`
    : `${update} AS released`;

  return {
    create: `CREATE TABLE IF NOT EXISTS ${table} (
  key_digest bytea PRIMARY KEY,
  key text NOT NULL,
  owner text,
  expires_at timestamptz NOT NULL,
  token bigint NOT NULL
)`,
    // Fails (42703) on a table of the earlier shape, keyed on `key` itself.
    checkShape: `SELECT key_digest FROM ${table} LIMIT 0`,
    acquire,
    renew,
    release,
    isLocked: `SELECT 1 AS locked FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()`,
    ttl: `SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms
FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()`,
    prune: `WITH pruned AS (
  DELETE FROM ${table} WHERE expires_at <= clock_timestamp() - $1::float8 * interval '1 millisecond' RETURNING 1
)
SELECT count(*)::float8 AS pruned FROM pruned`,
  };
}

module.exports = { statements, quoteIdentifier };
