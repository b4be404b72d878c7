package sqlite

import (
	"time"

	"bytes"
	"context"
	"fmt"
	"slices"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// claimColumns are the claim's columns, in the order of
// ClaimedEvent.ScanTargets.
const claimColumns = "id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at"

// eventsClaim is Claim's statement: one UPDATE that flips up to Limit due
// PENDING rows of the type, in (next_retry_at, id) order, to IN_PROCESS
// with a new claim token and the claiming instance (claimed_by), and
// returns them. Run on its own it is its own transaction.
//
// Locks: SQLite has one writer per file; an UPDATE takes the write lock
// before it reads a row, so two claimers (in one process or in two) run
// one after the other, the second waiting up to busy_timeout, and the
// second sees the first's rows IN_PROCESS: no SKIP LOCKED is needed. Index:
// the partial index (event_type, next_retry_at, id) WHERE status =
// 'PENDING' (migration 2) gives the rows in order without a sort.
func (d *Dialect) eventsClaim(p dialects.ClaimParams) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + `
   SET status = 'IN_PROCESS', claim_token = ?4, claimed_at = ?2, claimed_by = ?5, updated_at = ?2
 WHERE id IN (SELECT id FROM ` + d.tables.Events + `
               WHERE status = 'PENDING' AND event_type = ?1 AND next_retry_at <= ?2
               ORDER BY next_retry_at, id
               LIMIT ?3)
RETURNING ` + claimColumns,
		Args: []any{p.EventType, us(p.Now), p.Limit, d.EncodeID(p.Token), sqlkit.Nullable(p.Instance)},
	}
}

// eventsClaimProbe tells, with a plain read, whether a row of the type is
// due: the one statement an idle poll costs, which takes no write lock
// (a publisher's commit never waits for an idle relay). Index: the claim
// index.
func (d *Dialect) eventsClaimProbe(p dialects.ClaimParams) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT 1 FROM " + d.tables.Events + ` WHERE status = 'PENDING' AND event_type = ?1 AND next_retry_at <= ?2 LIMIT 1`,
		Args: []any{p.EventType, us(p.Now)},
	}
}

// claimSQL is SQLite's part of the ordered claim (sqlkit.ClaimSQL): the
// forms of MySQL/MariaDB, a planner that reads the bounded window whole
// and walks the keys with a GROUP BY.
type claimSQL struct{}

func (claimSQL) FirstRows(query, n string) string { return sqlkit.LimitClause(query, n) }

func (claimSQL) FirstOf(col, from, where string) string {
	return sqlkit.OrderLimitFirstOf(col, from, where)
}

func (claimSQL) Materialized() string { return "MATERIALIZED " }

func (claimSQL) InProcessHint() string { return "" }

func (claimSQL) HeadProbe() string { return "" }

func (claimSQL) LazyWindow() bool { return false }

func (claimSQL) KeyWalk() sqlkit.KeyWalk { return sqlkit.WalkGroupBy }

// eventsClaimCandidates is the first statement of an ordered claim
// (p.ByKey): a plain read of the candidates of sqlkit.OrderedCandidates
// (id, partition_key, next_retry_at) in (next_retry_at, id) order, and a
// marker row of NULLs when the window's read was cut and fewer than limit
// keys are busy (sqlkit.QueryCandidates), as MySQL's
// (sqlkit.CandidatesRead, without its FROM DUAL). It doubles as the idle
// probe.
func (d *Dialect) eventsClaimCandidates(p dialects.ClaimParams) dialects.Query {
	var b binder
	ctes, cand := sqlkit.OrderedCandidates(claimSQL{}, d.tables, &b, p)
	cut := sqlkit.WindowCut(claimSQL{}, d.tables, &b, p)
	return dialects.Query{SQL: "WITH " + ctes + "\n" + cand + `
UNION ALL
SELECT NULL, NULL, NULL
 WHERE ` + sqlkit.BusyFew(p) + `
   AND ` + cut + `
 ORDER BY next_retry_at, id`, Args: b.Args}
}

// eventsClaimWalk is the walk of an ordered claim (sqlkit.OrderedWalk),
// run only when the window was cut and the candidates are short.
func (d *Dialect) eventsClaimWalk(p dialects.ClaimParams) dialects.Query {
	var b binder
	return dialects.Query{SQL: sqlkit.WalkRead(claimSQL{}, d.tables, &b, p), Args: b.Args}
}

// eventsClaimLockCandidates is the second statement of an ordered claim,
// in its write transaction: the candidates still PENDING and due, read
// again under the write lock. Claim keeps a row only when every candidate
// of its key before it is among them (sqlkit.Claimable). Primary key
// lookups.
func (d *Dialect) eventsClaimLockCandidates(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	var b binder
	in := b.In("id", d.ids(ids))
	return b.Query("SELECT " + claimColumns + " FROM " + d.tables.Events + `
 WHERE ` + in + ` AND status = 'PENDING' AND next_retry_at <= ` + b.T(p.Now) + `
 ORDER BY next_retry_at, id`)
}

// eventsClaimUpdate is the last statement of an ordered claim: flip the
// kept rows to IN_PROCESS with the claim's token and instance.
func (d *Dialect) eventsClaimUpdate(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	var b binder
	set := "SET status = 'IN_PROCESS', claim_token = " + b.P(d.EncodeID(p.Token)) + ", claimed_at = " + b.T(p.Now) +
		", claimed_by = " + b.P(sqlkit.Nullable(p.Instance)) + ", updated_at = " + b.T(p.Now)
	return b.Query("UPDATE " + d.tables.Events + " " + set + "\n WHERE " + b.In("id", d.ids(ids)))
}

// Claim implements dialects.Relay. Unordered: eventsClaimProbe, then the
// one statement of eventsClaim. Ordered (p.ByKey): eventsClaimCandidates
// (and the walk) as plain reads, then, in one write transaction,
// eventsClaimLockCandidates and eventsClaimUpdate; the rows come in id
// order. A claimer that read its candidates before another's claim
// committed re-reads them under the write lock, where rows taken meanwhile
// are no longer PENDING and cut their key (sqlkit.Claimable).
func (d *Dialect) Claim(ctx context.Context, db wsql.Beginner, p dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	if !p.ByKey {
		if due, err := sqlkit.Exists(ctx, db, d.eventsClaimProbe(p)); err != nil || !due {
			return nil, err
		}
		events, err := queryClaimed(ctx, db, d.eventsClaim(p))
		if err != nil {
			return nil, err
		}
		sortClaimOrder(events) // RETURNING gives the rows in no set order
		return events, nil
	}
	cands, cut, err := sqlkit.QueryCandidates(ctx, db, d.eventsClaimCandidates(p))
	if err != nil {
		return nil, err
	}
	if cut && len(cands) < p.Limit {
		heads, _, err := sqlkit.QueryCandidates(ctx, db, d.eventsClaimWalk(p))
		if err != nil {
			return nil, err
		}
		cands = sqlkit.AppendWalked(cands, heads)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	var out []dialects.ClaimedEvent
	err = sqlkit.Tx{}.Run(ctx, db, func(tx wsql.Tx) error {
		out = nil
		// Every candidate is read again (a window and the walk's heads:
		// up to twice the limit), maxIDsPerStatement at a time: a
		// candidate left out would be no gap in its key, and a later row
		// of the key could be taken before it.
		var rows []dialects.ClaimedEvent
		err := sqlkit.Chunks(sqlkit.CandidateIDs(cands), maxIDsPerStatement, func(ids []oncebox.EventID) error {
			part, err := queryClaimed(ctx, tx, d.eventsClaimLockCandidates(p, ids))
			rows = append(rows, part...)
			return err
		})
		if err != nil || len(rows) == 0 {
			return err
		}
		sortClaimOrder(rows) // Claimable takes them in claim order
		if rows = sqlkit.Claimable(cands, rows, p.Limit); len(rows) == 0 {
			return nil
		}
		if _, err := sqlkit.ExecAffected(ctx, tx, d.eventsClaimUpdate(p, sqlkit.ClaimedIDs(rows))); err != nil {
			return err
		}
		out = rows
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sortClaimOrder puts claimed rows in claim order, (next_retry_at, id).
func sortClaimOrder(events []dialects.ClaimedEvent) {
	slices.SortStableFunc(events, func(a, b dialects.ClaimedEvent) int {
		if c := a.NextRetryAt.Compare(b.NextRetryAt); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
}

// queryClaimed runs q and scans its rows of claimColumns, the times
// through microTime (whatever the DSN's time reading).
func queryClaimed(ctx context.Context, db wsql.ContextExecutor, q dialects.Query) ([]dialects.ClaimedEvent, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.ClaimedEvent
	for rows.Next() {
		var e dialects.ClaimedEvent
		if err := rows.Scan(&e.ID, &e.Topic, &e.Key, &e.MessageUUID, &e.Payload, &e.Metadata, &e.RetryCount,
			microTime{&e.NextRetryAt}, nullMicroTime{&e.FirstFailedAt}); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, e)
	}
	return out, sqlkit.RowsErr(rows)
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
 WHERE status = 'PENDING' AND event_type = ?1 AND next_retry_at > ?2 AND next_retry_at > created_at
 ORDER BY next_retry_at
 LIMIT 1`,
		Args: []any{eventType, us(now)},
	}
}

// NextDue implements dialects.NextDueReader; the time is scanned through
// microTime, whatever the DSN's time reading.
func (d *Dialect) NextDue(ctx context.Context, db wsql.ContextExecutor, eventType string, now time.Time) (time.Time, bool, error) {
	return sqlkit.QueryNextDue(ctx, db, d.eventsNextDue(eventType, now), func(t *time.Time) any { return microTime{t} })
}
