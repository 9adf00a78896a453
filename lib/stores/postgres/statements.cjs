'use strict';
// The SQL of a PostgresLockStore: the table, and one statement per store method. Why each
// statement keeps the promises at the top of index.cjs is said above it.

const { permitStatements, heldUntil } = require('./permit-statements.cjs');

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
   * A key held with permits (permit-statements.cjs) is live by its expires_at too, and
   * then answered with its limit (`lim`): read from the statement's snapshot, a state
   * the key was in during the statement (a refusal changes nothing, so it holds then).
   * A row with a token wins when there are both (a lapsed key just taken).
   */
  const acquire = `WITH now AS (SELECT clock_timestamp() AS t), taken AS (
INSERT INTO ${table} AS l (key_digest, key, owner, expires_at, token)
SELECT ${digest}, $1::text, $2::text, t + $3::float8 * interval '1 millisecond', floor(extract(epoch FROM t) * 1000000)::bigint FROM now
ON CONFLICT (key_digest) DO UPDATE
  SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, token = greatest(l.token + 1, EXCLUDED.token), permits = NULL
  WHERE l.expires_at <= clock_timestamp()
RETURNING l.token::text AS token)
SELECT token, NULL::bigint AS lim FROM taken
UNION ALL
SELECT NULL, (permits->>'l')::bigint FROM ${table}
WHERE key_digest = ${digest} AND owner IS NULL AND permits IS NOT NULL AND expires_at > clock_timestamp()`;

  return {
    create: `CREATE TABLE IF NOT EXISTS ${table} (
  key_digest bytea PRIMARY KEY,
  key text NOT NULL,
  owner text,
  expires_at timestamptz NOT NULL,
  token bigint NOT NULL,
  permits jsonb
)`,
    // A table made before permits: the column is added once (addPermits).
    checkPermits: `SELECT permits FROM ${table} LIMIT 0`,
    addPermits: `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS permits jsonb`,
    // Fails (42703) on a table of the earlier shape, keyed on `key` itself.
    checkShape: `SELECT key_digest FROM ${table} LIMIT 0`,
    acquire,
    // permitAcquire, and renew and release for plain leases and permits alike.
    ...permitStatements(table, notify),
    // A key held with permits: until its last live holder's expiry (waiters do not hold it).
    isLocked: `SELECT 1 AS locked FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()
  AND (owner IS NOT NULL OR ${heldUntil('permits')} IS NOT NULL)`,
    ttl: `SELECT ms FROM (
  SELECT ceil(extract(epoch FROM CASE WHEN owner IS NULL THEN ${heldUntil('permits')} ELSE expires_at END - clock_timestamp()) * 1000)::float8 AS ms
  FROM ${table} WHERE key_digest = ${digest} AND expires_at > clock_timestamp()
) AS left_ms WHERE ms IS NOT NULL`,
    prune: `WITH pruned AS (
  DELETE FROM ${table} WHERE expires_at <= clock_timestamp() - $1::float8 * interval '1 millisecond' RETURNING 1
)
SELECT count(*)::float8 AS pruned FROM pruned`,
  };
}

module.exports = { statements, quoteIdentifier };
