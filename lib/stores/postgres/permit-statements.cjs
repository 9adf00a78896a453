'use strict';
/*
 * The SQL of a PostgresLockStore's permits (issue #28; README, "Limits and shared
 * reads"). A key held with permits keeps its one row (statements.cjs): `owner` is NULL,
 * `token` is the key's one counter as for plain leases, and the `permits` column (jsonb)
 * holds the rest:
 *
 *   { "l": the key's limit,
 *     "h": { owner: { "w": weight, "e": expiry, "t": token } },          the holders
 *     "q": { owner: { "w": weight, "q": since, "e": expiry, "c": bool } }, the waiters
 *     "g"/"r": the owner this statement granted / released (read by RETURNING) }
 *
 * Times are database microseconds since the epoch. `expires_at` is the latest expiry of
 * the live holders and confirmed waiters as of the last acquire (or the statement's time
 * when there is none), raised by renewals, and the release time once the last holder or
 * waiter leaves: a plain statement sees the key held while permits or their waiters are
 * (statements.cjs answers the key's limit then). Every statement takes the
 * key's row lock (ON CONFLICT DO UPDATE, UPDATE) and computes from the row's latest
 * version under it, in one statement: a read of another row would see the statement's
 * snapshot, taken before the lock was waited for.
 *
 * The queue. The store announces releases and does not grant, so the engine's waiters
 * try again on a NOTIFY or a poll (at most a second apart). A refused try leaves an
 * entry; the same owner refused again confirms it (it is waiting: a try that will not
 * wait is refused once and never holds anyone up). A confirmed entry reserves its
 * weight against everyone who came after it: a request is granted only if the holders,
 * the confirmed waiters ahead of it and itself fit in the limit, so a heavy or
 * exclusive waiter is not overtaken. An entry lapses QUEUE_LAPSE_MS after its owner's
 * last try (a waiter that gave up or died holds nobody up longer).
 */

/** How long a waiter's place is kept after its last try: past the engine's longest poll (1 s). */
const QUEUE_LAPSE_MS = 3000;

/** Database time in µs, taken when the expression runs (after the row lock is waited for). */
const NOW_US = `floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`;

/** The timestamptz of `us` microseconds since the epoch. */
const stamp = (us) => `to_timestamp((${us})::float8 / 1000000)`;

/**
 * `expires_at` of a permits value `p` at `n` µs: the latest live holder's or confirmed
 * waiter's expiry, else `n` (the key is free).
 */
function latest(p, n) {
  return `${stamp(`coalesce((SELECT max((v->>'e')::bigint) FROM (
      SELECT v FROM jsonb_each(${p}->'h') AS h(k, v)
      UNION ALL SELECT v FROM jsonb_each(${p}->'q') AS q(k, v) WHERE (v->>'c')::boolean
    ) AS x WHERE (v->>'e')::bigint > ${n}), ${n})`)}`;
}

/**
 * Until when the live holders of a permits value `p` hold the key (their latest expiry,
 * a timestamptz), NULL when none does: what `isLocked` and `ttl` read, which `expires_at`
 * may exceed (see RENEW).
 */
function heldUntil(p) {
  return `(SELECT ${stamp("max((v->>'e')::bigint)")} FROM jsonb_each(${p}->'h') AS h(k, v)
    WHERE (v->>'e')::bigint > ${NOW_US})`;
}

/** The statements on `table` (quoted, schema-qualified) for permits. */
function permitStatements(table, notify) {
  const digest = `sha256(convert_to($1::text, 'UTF8'))`;
  const ttlUs = `round($3::float8 * 1000)::bigint`;

  /*
   * ACQUIRE. $1 key, $2 owner, $3 ttl ms, $4 limit, $5 weight. A new row is a grant.
   * On an existing row, under its lock: `s` is the key's live state at `n` (lapsed
   * holders and waiters dropped; a row with a plain owner has none), `d` the decision.
   * A key held by a plain lease, or held or waited for with another limit, answers its
   * limit and is left as it was. RETURNING reads the new row: a token when this owner
   * was granted ("g"), and the key's limit.
   */
  const acquire = `WITH c AS (SELECT clock_timestamp() AS t)
INSERT INTO ${table} AS l (key_digest, key, owner, expires_at, token, permits)
SELECT ${digest}, $1::text, NULL, t + $3::float8 * interval '1 millisecond', u,
  jsonb_build_object('l', $4::bigint, 'g', $2::text, 'q', '{}'::jsonb,
    'h', jsonb_build_object($2::text, jsonb_build_object('w', $5::bigint, 'e', u + ${ttlUs}, 't', u)))
FROM c, LATERAL (SELECT floor(extract(epoch FROM t) * 1000000)::bigint AS u) AS u
ON CONFLICT (key_digest) DO UPDATE SET (owner, expires_at, token, permits) = (
  SELECT CASE WHEN d.mismatch THEN l.owner END,
    CASE WHEN d.mismatch THEN l.expires_at ELSE ${latest('d.p', 's.n')} END,
    CASE WHEN d.granted THEN d.token ELSE l.token END,
    d.p
  FROM (SELECT ${NOW_US} AS n) AS s0,
  LATERAL (SELECT s0.n,
      l.owner IS NOT NULL AND l.expires_at > ${stamp('s0.n')} AS plain,
      CASE WHEN l.owner IS NULL THEN l.permits END AS p) AS s1,
  LATERAL (SELECT s1.n, s1.plain, s1.p,
      coalesce((SELECT jsonb_object_agg(k, v) FROM jsonb_each(s1.p->'h') AS h(k, v) WHERE (v->>'e')::bigint > s1.n), '{}') AS h,
      coalesce((SELECT jsonb_object_agg(k, v) FROM jsonb_each(s1.p->'q') AS q(k, v) WHERE (v->>'e')::bigint > s1.n), '{}') AS q
    ) AS s,
  LATERAL (SELECT
      coalesce((SELECT sum((v->>'w')::bigint) FROM jsonb_each(s.h) AS h(k, v)), 0) AS held,
      coalesce((SELECT sum((v->>'w')::bigint) FROM jsonb_each(s.q) AS q(k, v)
        WHERE (v->>'c')::boolean AND k <> $2::text
          AND (s.q->$2::text IS NULL OR ((v->>'q')::bigint, k) < ((s.q->$2::text->>'q')::bigint, $2::text))), 0) AS ahead,
      CASE WHEN s.plain THEN 1
        WHEN s.h <> '{}' OR EXISTS (SELECT 1 FROM jsonb_each(s.q) AS q(k, v) WHERE (v->>'c')::boolean) THEN (s.p->>'l')::bigint
      END AS keyed,
      greatest(l.token + 1, s.n) AS token
    ) AS k,
  LATERAL (SELECT k.keyed IS NOT NULL AND k.keyed <> $4::bigint AS mismatch,
      k.keyed IS NULL OR k.keyed = $4::bigint AS agreed) AS a,
  LATERAL (SELECT a.mismatch, k.token,
      a.agreed AND NOT s.h ? $2::text AND k.held + k.ahead + $5::bigint <= $4::bigint AS granted) AS g0,
  LATERAL (SELECT g0.mismatch, g0.granted, g0.token, CASE
      WHEN g0.mismatch THEN l.permits
      WHEN g0.granted THEN jsonb_build_object('l', $4::bigint, 'g', $2::text, 'q', s.q - $2::text,
        'h', s.h || jsonb_build_object($2::text, jsonb_build_object('w', $5::bigint, 'e', s.n + ${ttlUs}, 't', g0.token)))
      WHEN s.h ? $2::text THEN jsonb_build_object('l', $4::bigint, 'q', s.q - $2::text, 'h', s.h)
      ELSE jsonb_build_object('l', $4::bigint, 'h', s.h, 'q', s.q || jsonb_build_object($2::text, jsonb_build_object(
        'w', $5::bigint, 'q', coalesce((s.q->$2::text->>'q')::bigint, s.n), 'e', s.n + ${QUEUE_LAPSE_MS * 1000},
        'c', s.q ? $2::text)))
    END AS p) AS d
)
RETURNING CASE WHEN l.permits->>'g' = $2::text THEN l.token::text END AS token,
  CASE WHEN l.owner IS NOT NULL THEN 1 ELSE (l.permits->>'l')::bigint END AS lim`;

  /*
   * RENEW (plain leases and permits). $1 key, $2 owner, $3 ttl ms, $4 carried token.
   * A plain lease as before; a live permit of this owner gets ttl from now. The plain
   * path must stay as cheap to plan as before permits: no subquery, so the row's expiry
   * only grows here (the next permit acquire sets it exactly; until then a plain try may
   * see the key held with permits a little longer, which only a mixed use of the key
   * notices).
   */
  const until = `clock_timestamp() + $3::float8 * interval '1 millisecond'`;
  const renew = `UPDATE ${table}
SET expires_at = CASE WHEN owner = $2::text THEN ${until} ELSE greatest(expires_at, ${until}) END,
  permits = CASE WHEN owner = $2::text THEN permits
    ELSE jsonb_set(permits, ARRAY['h', $2::text, 'e'], to_jsonb(${NOW_US} + ${ttlUs})) END,
  token = greatest(token, $4::bigint)
WHERE key_digest = ${digest} AND expires_at > clock_timestamp()
  AND (owner = $2::text OR (owner IS NULL AND (permits->'h'->$2::text->>'e')::bigint > ${NOW_US}))
RETURNING 1 AS renewed`;

  /*
   * RELEASE (plain leases and permits). $1 key, $2 owner, $3 carried token,
   * [$4 channel]. A plain lease as before; a permit of this owner (or its place in the
   * queue) is dropped, "r" marking a live permit released. The key is free at once when
   * nobody else holds or waits; else its expiry stays (see RENEW). The NOTIFY is sent
   * at commit, only when a live lease or permit was released.
   */
  const left = (part) => `coalesce(permits->'${part}', '{}') - $2::text`;
  const update = `UPDATE ${table} AS l
  SET owner = NULL,
    expires_at = CASE WHEN owner IS NOT NULL OR (${left('h')} = '{}' AND ${left('q')} = '{}') THEN clock_timestamp()
      ELSE expires_at END,
    permits = CASE WHEN owner IS NOT NULL THEN NULL
      ELSE (permits - 'g' - 'r') || jsonb_build_object('h', ${left('h')}, 'q', ${left('q')})
        || CASE WHEN (permits->'h'->$2::text->>'e')::bigint > ${NOW_US} THEN jsonb_build_object('r', $2::text) ELSE '{}' END
    END,
    token = greatest(token, $3::bigint)
  WHERE key_digest = ${digest} AND ((owner = $2::text AND expires_at > clock_timestamp())
    OR (owner IS NULL AND (permits->'h' ? $2::text OR permits->'q' ? $2::text)))
  RETURNING l.permits IS NULL OR l.permits->>'r' = $2::text AS done`;
  const release = notify
    ? `WITH released AS (\n  ${update}\n)\nSELECT 1 AS released, pg_notify($4::text, '') FROM released WHERE done`
    : `WITH released AS (\n  ${update}\n)\nSELECT 1 AS released FROM released WHERE done`;

  return { permitAcquire: acquire, renew, release };
}

module.exports = { permitStatements, heldUntil, QUEUE_LAPSE_MS };
