package postgres

import (
	"time"

	"context"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// eventsClaim is Claim's statement: one statement that locks up to Limit due
// PENDING rows of the type, skipping rows other claimers hold, and flips them
// to IN_PROCESS with a new claim token and the claiming instance
// (claimed_by). Run outside a transaction, it commits before anything is
// sent.
//
// Locks: FOR UPDATE SKIP LOCKED takes row locks on the selected rows only and
// never waits, so concurrent claimers each get a disjoint batch. Index: the
// partial index (event_type, next_retry_at, id) WHERE status = 'PENDING'
// (migration 2) gives the rows in (next_retry_at, id) order without a sort:
// the rows of one multi-row publish share next_retry_at, and id keeps them in
// publish order.
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

func (claimSQL) Materialized() string { return "MATERIALIZED " }

func (claimSQL) InProcessHint() string { return "" }

// HeadProbe makes the head probe visit the heap (see sqlkit.ClaimSQL).
func (claimSQL) HeadProbe() string { return " AND b.next_retry_at IS NOT NULL" }

func (claimSQL) LazyWindow() bool { return true }

func (claimSQL) KeyWalk() sqlkit.KeyWalk { return sqlkit.WalkRecursiveCounted }

// eventsClaimByKey is eventsClaim of an ordered type, still one statement:
// the candidates of sqlkit.OrderedCandidates (a prefix of each idle key's PENDING
// rows within a window of due rows), locked FOR UPDATE SKIP LOCKED one
// primary-key probe each (a LATERAL subquery: the join it replaced was
// planned, on a table without statistics, as a scan of the due index with
// the candidates scanned again for each row, 5,000 × 1,000 comparisons,
// 1.1 s of a claim of one key's 5,000 rows; now 30 ms, measured), with a
// re-check on their latest version that they are still PENDING and due,
// kept when every candidate of their key before them was locked too,
// and flipped; when the window's read was cut and its candidates are
// short, the walk of the type's keys adds the due heads of keys not held
// (sqlkit.OrderedWalk). The reads share the statement's snapshot, which row locks
// do not hide. Indexes: outbox_events_due_idx for the window,
// outbox_events_in_process_idx for the busy keys, outbox_events_key_idx
// (migration 4) for the stop probes (docs/ordering.md shows the plan).
// Claim returns the rows in id order (sqlkit.SortByID).
func (d *Dialect) eventsClaimByKey(p dialects.ClaimParams) dialects.Query {
	var b binder
	ctes, cand := sqlkit.OrderedCandidates(claimSQL{}, d.tables, &b, p)
	// The walk (sqlkit.OrderedWalk) runs under a one-time filter: PostgreSQL
	// evaluates its scalar subqueries lazily, left to right, so a claim
	// whose window yielded limit candidates counts them (cand0,
	// materialized) and reads nothing more. pre (the first limit due
	// rows, read already) stands for sqlkit.WindowCut here: with fewer than
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

// Claim implements dialects.Relay with the one statement of eventsClaim; an
// ordered claim's rows in id order.
func (d *Dialect) Claim(ctx context.Context, db wsql.Beginner, p dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	events, err := sqlkit.QueryClaimed(ctx, db, d.eventsClaim(p), 0)
	if p.ByKey {
		sqlkit.SortByID(events)
	}
	return events, err
}

// eventsNextDue is NextDue's statement: the first entry later than after of the
// type's range of the claim index (event_type, next_retry_at, id) WHERE
// status = 'PENDING', one index probe however many rows wait.
// Only a row that was delayed or retried counts (next_retry_at later than
// created_at): a plain event is due when written, and its arrival is the
// wake-up's and the pace's business. Counted, an arrival cut every sleep
// of a relay that polls, so that its adaptive pace grew with no full batch
// to reset it (bench latency, polling only: p50 255 ms became 547-1,587 ms;
// docs/delay.md). created_at is read from the table for the entries after
// the bound only: the rows written since the last claim began.
func (d *Dialect) eventsNextDue(eventType string, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: `SELECT next_retry_at FROM ` + d.tables.Events + `
 WHERE status = 'PENDING' AND event_type = $1 AND next_retry_at > $2 AND next_retry_at > created_at
 ORDER BY next_retry_at
 LIMIT 1`,
		Args: []any{eventType, now},
	}
}

// NextDue implements dialects.NextDueReader.
func (d *Dialect) NextDue(ctx context.Context, db wsql.ContextExecutor, eventType string, now time.Time) (time.Time, bool, error) {
	return sqlkit.QueryNextDue(ctx, db, d.eventsNextDue(eventType, now), nil)
}
