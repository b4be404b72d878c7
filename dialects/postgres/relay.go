package postgres

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// eventsClaim implements Dialect: one statement that locks up to Limit due
// PENDING rows of the type, skipping rows other claimers hold, and flips them
// to IN_PROCESS with a new claim token and the claiming instance
// (claimed_by). Run outside a transaction, it commits
// before anything is sent.
//
// Locks: FOR UPDATE SKIP LOCKED takes row locks on the selected rows only and
// never waits, so concurrent claimers each get a disjoint batch. Index: the
// partial index (event_type, next_retry_at, id) WHERE status = 'PENDING'
// (migration 2) gives the rows in (next_retry_at, id) order without a sort:
// the rows of one multi-row publish share next_retry_at, and id keeps them
// in publish order.
//
// With p.ByKey only a prefix of each idle key's PENDING rows is taken
// (eventsClaimByKey, docs/ordering.md).
func (d *Dialect) eventsClaim(p dialects.ClaimParams) dialects.Query {
	if p.ByKey {
		return d.eventsClaimByKey(p)
	}
	return dialects.Query{
		SQL: `WITH due AS (
    SELECT id FROM ` + d.tables.Events + `
     WHERE status = 'PENDING' AND event_type = $1 AND next_retry_at <= $2
     ORDER BY next_retry_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE ` + d.tables.Events + ` e
   SET status = 'IN_PROCESS', claim_token = $4, claimed_at = $2, claimed_by = $5, updated_at = $2
  FROM due
 WHERE e.id = due.id
RETURNING e.` + claimReturningQualified,
		Args: []any{p.EventType, p.Now, p.Limit, d.EncodeID(p.Token), sqlkit.Nullable(p.Instance)},
	}
}

// claimSQL is PostgreSQL's part of the ordered claim (sqlkit.ClaimSQL).
type claimSQL struct{}

func (claimSQL) FirstRows(query, n string) string { return sqlkit.LimitClause(query, n) }

func (claimSQL) FirstOf(col, from, where string) string {
	return sqlkit.OrderLimitFirstOf(col, from, where)
}

func (claimSQL) Materialized() string  { return "MATERIALIZED " }
func (claimSQL) InProcessHint() string { return "" }

// HeadProbe makes the head probe visit the heap (see sqlkit.ClaimSQL).
func (claimSQL) HeadProbe() string       { return " AND b.next_retry_at IS NOT NULL" }
func (claimSQL) LazyWindow() bool        { return true }
func (claimSQL) KeyWalk() sqlkit.KeyWalk { return sqlkit.WalkRecursiveCounted }

// eventsClaimByKey is eventsClaim of an ordered type, still one statement:
// the candidates of orderedCandidates (a prefix of each idle key's PENDING
// rows within a window of due rows), locked FOR UPDATE SKIP LOCKED one
// primary-key probe each (a LATERAL subquery: the join it replaced was
// planned, on a table without statistics, as a scan of the due index with
// the candidates scanned again for each row, 5,000 × 1,000 comparisons,
// 1.1 s of a claim of one key's 5,000 rows; now 30 ms, measured), with a
// re-check on their latest version that they are still PENDING and due,
// kept when every candidate of their key before them was locked too,
// and flipped; when the window's read was cut and its candidates are
// short, the walk of the type's keys adds the due heads of keys not held
// (orderedWalk). The reads share the statement's snapshot, which row locks
// do not hide. Indexes: outbox_events_due_idx for the window,
// outbox_events_in_process_idx for the busy keys, outbox_events_key_idx
// (migration 4) for the stop probes (docs/ordering.md shows the plan).
// Claim returns the rows in id order (sortByID).
func (d *Dialect) eventsClaimByKey(p dialects.ClaimParams) dialects.Query {
	var b binder
	ctes, cand := sqlkit.OrderedCandidates(claimSQL{}, d.tables, &b, p)
	// The walk (orderedWalk) runs under a one-time filter: PostgreSQL
	// evaluates its scalar subqueries lazily, left to right, so a claim
	// whose window yielded limit candidates counts them (cand0,
	// materialized) and reads nothing more. pre (the first limit due
	// rows, read already) stands for windowCut here: with fewer than
	// limit due rows the window saw them all; counting keyScan(limit)
	// index entries instead cost 5 of a 12.5 ms claim of one key's 5,000
	// rows (measured), where the walk of that type is two probes.
	gate := `(SELECT COUNT(*) FROM cand0) < ` + sqlkit.Lit(p.Limit) + `
       AND ` + sqlkit.BusyFew(p) + `
       AND (SELECT COUNT(*) FROM pre) >= ` + sqlkit.Lit(p.Limit)
	walk, heads := sqlkit.OrderedWalk(claimSQL{}, d.tables, &b, p, gate, "cand0")
	now, token, instance, limit := b.T(p.Now), b.P(d.EncodeID(p.Token)), b.P(sqlkit.Nullable(p.Instance)), sqlkit.Lit(p.Limit)
	return dialects.Query{
		SQL: "WITH RECURSIVE " + ctes + `,
cand0 AS MATERIALIZED (
    ` + cand + `
),
` + walk + `,
wh AS MATERIALIZED (
    ` + heads + `
),
cand AS MATERIALIZED (
    SELECT id, partition_key, next_retry_at FROM cand0
    UNION ALL
    SELECT id, partition_key, next_retry_at FROM wh
),
locked AS MATERIALIZED (
    SELECT c.id, c.partition_key, c.next_retry_at FROM cand CROSS JOIN LATERAL (
        SELECT l.id, l.partition_key, l.next_retry_at FROM ` + d.tables.Events + ` l
         WHERE l.id = cand.id AND l.status = 'PENDING' AND l.next_retry_at <= ` + now + `
           FOR UPDATE SKIP LOCKED) c
),
missed AS MATERIALIZED (
    SELECT m.id, m.partition_key FROM cand m
     WHERE m.partition_key IS NOT NULL AND m.id NOT IN (SELECT id FROM locked)
),
kept AS (
    SELECT l.id, l.partition_key, l.next_retry_at,
           first_value(l.next_retry_at) OVER g AS g_at, first_value(l.id) OVER g AS g_id
      FROM locked l
     WHERE NOT EXISTS (SELECT 1 FROM missed g WHERE g.partition_key = l.partition_key AND g.id < l.id)
    WINDOW g AS (PARTITION BY l.partition_key, CASE WHEN l.partition_key IS NULL THEN l.id END ORDER BY l.next_retry_at, l.id)
),
due AS (
    SELECT id FROM kept ORDER BY g_at, g_id, id LIMIT ` + limit + `
)
UPDATE ` + d.tables.Events + ` e
   SET status = 'IN_PROCESS', claim_token = ` + token + `, claimed_at = ` + now + `, claimed_by = ` + instance + `, updated_at = ` + now + `
  FROM due
 WHERE e.id = due.id
RETURNING e.` + claimReturningQualified,
		Args: b.Args,
	}
}

// claimReturningQualified is the RETURNING list of the claim after "e.", in
// the order of ClaimedEvent.ScanTargets.
const claimReturningQualified = "id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at"

// eventsMarkProcessed implements Dialect. The claim token guards the update:
// a row recovered and claimed again by another instance has a new token, so a
// late finalize of the old claim changes nothing. It returns the ids it
// marked, so that only those are reported as sent.
func (d *Dialect) eventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PROCESSED', updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'
RETURNING id`,
		Args: []any{now, d.idArray(ids), d.EncodeID(token)},
	}
}

// eventsMarkProcessedClaims is eventsMarkProcessed for the confirmed rows of
// several claims at once (a merged finalize): one statement, one commit.
// Each row carries its own claim's token, so the guard is the same as
// eventsMarkProcessed's: a row whose claim was recovered and taken again
// meanwhile has a new token and is left alone, whatever the other claims
// of the statement. It returns the ids it marked.
//
// Locks: row locks on the rows it updates, as eventsMarkProcessed. Index:
// the primary key, one probe per (id, token) pair of the unnested arrays.
func (d *Dialect) eventsMarkProcessedClaims(claims []dialects.ClaimIDs, now time.Time) dialects.Query {
	n := 0
	for _, c := range claims {
		n += len(c.IDs)
	}
	ids := make([]string, 0, n)
	tokens := make([]string, 0, n)
	for _, c := range claims {
		token := c.Token.String()
		for _, id := range c.IDs {
			ids = append(ids, id.String())
			tokens = append(tokens, token)
		}
	}
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` e SET status = 'PROCESSED', updated_at = $1
  FROM unnest($2::uuid[], $3::uuid[]) AS u(id, claim_token)
 WHERE e.id = u.id AND e.claim_token = u.claim_token AND e.status = 'IN_PROCESS'
RETURNING e.id`,
		Args: []any{now, ids, tokens},
	}
}

// EventsMarkFailed implements Dialect: each row gets its own retry count,
// next retry time and status from arrays unnested in one statement, under the
// same claim-token guard as eventsMarkProcessed.
func (d *Dialect) EventsMarkFailed(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	ids := make([]string, len(rows))
	statuses := make([]string, len(rows))
	counts := make([]int32, len(rows))
	next := make([]time.Time, len(rows))
	errs := make([]string, len(rows))
	for i, r := range rows {
		ids[i], statuses[i], counts[i], next[i], errs[i] = r.ID.String(), string(r.Status), int32(r.RetryCount), r.NextRetryAt, sqlkit.ErrorText(r.Error)
	}
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` e
   SET status = u.status, retry_count = u.retry_count, next_retry_at = u.next_retry_at,
       last_error = u.last_error, first_failed_at = COALESCE(e.first_failed_at, $1),
       claim_token = NULL, claimed_at = NULL, updated_at = $1
  FROM unnest($2::uuid[], $3::text[], $4::int[], $5::timestamptz[], $6::text[])
       AS u(id, status, retry_count, next_retry_at, last_error)
 WHERE e.id = u.id AND e.claim_token = $7 AND e.status = 'IN_PROCESS'`,
		Args: []any{now, ids, statuses, counts, next, errs, d.EncodeID(token)},
	}
}

// EventsRelease implements Dialect: rows of a claim go back to PENDING as
// they were, without counting an attempt (broker unreachable, shutdown).
func (d *Dialect) EventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'`,
		Args: []any{now, d.idArray(ids), d.EncodeID(token)},
	}
}

// EventsRecover implements Dialect: up to limit rows IN_PROCESS since before
// cutoff go back to PENDING without counting an attempt, and lose their claim
// token so that the stuck claimer's late finalize matches nothing.
//
// Locks: SKIP LOCKED passes over rows a finalizing claimer is updating right
// now; they are no longer stuck. Index: the partial index (claimed_at) WHERE
// status = 'IN_PROCESS'.
func (d *Dialect) EventsRecover(cutoff, now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = $1
 WHERE id IN (SELECT id FROM ` + d.tables.Events + `
               WHERE status = 'IN_PROCESS' AND claimed_at < $2
               LIMIT $3 FOR UPDATE SKIP LOCKED)`,
		Args: []any{now, cutoff, limit},
	}
}

// eventsMoveToDLQ implements Dialect: up to limit FAILED rows are locked,
// copied into the DLQ table (status MOVED, source publisher, the DLQ row's id
// is the event id) and deleted, all in one statement and so in one
// transaction: a crash leaves each row either in the outbox or in the DLQ.
func (d *Dialect) eventsMoveToDLQ(now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH moved AS (
    DELETE FROM ` + d.tables.Events + `
     WHERE id IN (SELECT id FROM ` + d.tables.Events + `
                   WHERE status = 'FAILED' ORDER BY updated_at
                   LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING *
)
INSERT INTO ` + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', '', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, $1, $1
  FROM moved`,
		Args: []any{now, limit},
	}
}

// EventsDeleteProcessed implements Dialect: up to limit PROCESSED rows last
// updated before cutoff. Index: the partial index (updated_at) WHERE status =
// 'PROCESSED'.
func (d *Dialect) EventsDeleteProcessed(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.Events + ` WHERE id IN (SELECT id FROM ` + d.tables.Events + `
 WHERE status = 'PROCESSED' AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		Args: []any{cutoff, limit},
	}
}

// leaseAcquire implements Dialect: take the lease when nobody holds it or
// when the holder's lease has run out; one row affected means taken.
func (d *Dialect) leaseAcquire(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Jobs + ` AS j (name, locked_by, locked_at, lock_until) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET locked_by = EXCLUDED.locked_by, locked_at = EXCLUDED.locked_at,
       lock_until = EXCLUDED.lock_until
 WHERE j.lock_until <= EXCLUDED.locked_at`,
		Args: []any{l.Name, l.Owner, l.LockedAt, l.Until},
	}
}

// LeaseRelease implements Dialect: shorten the lease held by l.Owner since
// l.LockedAt to end at l.Until (the at-least time, or now).
func (d *Dialect) LeaseRelease(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.Jobs + " SET lock_until = $1 WHERE name = $2 AND locked_by = $3 AND locked_at = $4",
		Args: []any{l.Until, l.Name, l.Owner, l.LockedAt},
	}
}

func (d *Dialect) idArray(ids []oncebox.EventID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// EventsDueTypes implements Dialect: a recursive CTE that jumps from one
// event type to the next through the claim index (event_type,
// next_retry_at, id) WHERE status = 'PENDING' (min() takes the first entry
// after the previous type: one probe), n stopping it after limit types;
// then, for each type, one probe for its first entry due at now (the
// index's order within a type is next_retry_at's). The due test is not in
// the jump: there it made min() pass every entry of a type that waits for
// a retry (200,000 such rows: a 21–35 ms scan of the index per idle poll,
// measured, against 0.1 ms now). PostgreSQL evaluates a recursive CTE only
// as far as the outer query reads it.
func (d *Dialect) EventsDueTypes(now time.Time, after string, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM ` + d.tables.Events + `
     WHERE status = 'PENDING' AND event_type > $2
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM ` + d.tables.Events + ` e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < $3
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM ` + d.tables.Events + ` e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= $1)
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type`,
		Args: []any{now, after, limit},
	}
}
