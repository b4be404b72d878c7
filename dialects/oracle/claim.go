package oracle

import (
	"time"

	"context"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// oracleClaimColumns is the select list of the claim cursor, in the order of
// ClaimedEvent.ScanTargets.
const oracleClaimColumns = "id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at"

// eventsClaimLock is the claim's cursor: every due PENDING row of the type
// in (next_retry_at, id) order, FOR UPDATE SKIP LOCKED. With SKIP LOCKED Oracle
// locks rows as they are fetched, so Claim fetches Limit rows and closes the
// cursor; no FETCH FIRST (ORA-02014 with FOR UPDATE) and no ROWNUM (it cuts
// the rows before the locked ones are skipped, so concurrent claimers would
// all get the same first rows, minus those locked: mostly nothing). Index:
// (status, event_type, next_retry_at, id) (migration 2) gives the rows in
// order.
func (d *Dialect) eventsClaimLock(p dialects.ClaimParams) dialects.Query {
	var b binder
	return b.Query("SELECT " + oracleClaimColumns + "\n  FROM " + d.tables.Events +
		"\n WHERE status = 'PENDING' AND event_type = " + b.P(p.EventType) +
		" AND next_retry_at <= " + b.T(p.Now) +
		"\n ORDER BY next_retry_at, id\n   FOR UPDATE SKIP LOCKED")
}

// eventsClaimCandidates is the first statement of an ordered claim
// (p.ByKey): a plain read, without locks, of the candidates of
// sqlkit.OrderedCandidates (id, partition_key, next_retry_at) in (next_retry_at,
// id) order. A plain read sees the committed state whatever the locks, so
// a row another claimer holds still stops its key; ROWNUM is safe outside
// FOR UPDATE. One statement, one snapshot. It doubles as the idle probe.
// Indexes: (status, event_type, next_retry_at, id) for the window and the
// busy keys, (event_type, partition_key, status, id) (migration 4) for the
// stop probes.
func (d *Dialect) eventsClaimCandidates(p dialects.ClaimParams) dialects.Query {
	var b binder
	ctes, cand := sqlkit.OrderedCandidates(claimSQL{}, d.tables, &b, p)
	return b.Query(sqlkit.CandidatesRead(p, ctes, cand, sqlkit.WindowCut(claimSQL{}, d.tables, &b, p)))
}

// eventsClaimWalk is the third statement of an ordered claim, run only
// when eventsClaimCandidates reported its window cut and found fewer
// candidates than p.Limit: the walk of the type's keys (sqlkit.OrderedWalk), a
// recursive WITH jumping from key to key through (event_type,
// partition_key, status, id) with MIN() (an INDEX RANGE SCAN (MIN/MAX)
// per step), then one MIN() probe per key for its first PENDING row. A
// plain read, so ROWNUM is safe.
func (d *Dialect) eventsClaimWalk(p dialects.ClaimParams) dialects.Query {
	var b binder
	return b.Query(sqlkit.WalkRead(claimSQL{}, d.tables, &b, p))
}

// claimSQL is Oracle's part of the ordered claim (sqlkit.ClaimSQL).
type claimSQL struct{}

// FirstRows is ROWNUM over the ordered query, in a plain read.
func (claimSQL) FirstRows(query, n string) string {
	return "SELECT * FROM (" + query + ")\n                        WHERE ROWNUM <= " + n
}

// FirstOf is MIN(col): a scalar subquery cannot be limited on 19c.
func (claimSQL) FirstOf(col, from, where string) string { return sqlkit.MinFirstOf(col, from, where) }

func (claimSQL) Materialized() string { return "" }

func (claimSQL) InProcessHint() string { return "" }

func (claimSQL) HeadProbe() string { return "" }

func (claimSQL) LazyWindow() bool { return false }

func (claimSQL) KeyWalk() sqlkit.KeyWalk { return sqlkit.WalkRecursive }

// eventsClaimLockCandidates is the ordered claim's cursor: the candidates
// eventsClaimCandidates found that are still PENDING and due on their
// current version, in (next_retry_at, id) order, FOR UPDATE SKIP LOCKED;
// Claim fetches them all and keeps a locked row only when every candidate
// of its key before it was locked too (keepKeyPrefixes).
func (d *Dialect) eventsClaimLockCandidates(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("SELECT " + oracleClaimColumns + "\n  FROM " + d.tables.Events +
		"\n WHERE " + idIn(&b, "id", ids, d) + " AND status = 'PENDING' AND next_retry_at <= " + b.T(p.Now) +
		"\n ORDER BY next_retry_at, id\n   FOR UPDATE SKIP LOCKED")
}

// eventsClaimProbe tells, without locking, whether a row of the type is
// due: the one statement of an idle poll (no transaction, no cursor of
// locks). A plain read, so ROWNUM is safe here.
func (d *Dialect) eventsClaimProbe(p dialects.ClaimParams) dialects.Query {
	var b binder
	return b.Query("SELECT 1 FROM " + d.tables.Events + "\n WHERE status = 'PENDING' AND event_type = " + b.P(p.EventType) +
		" AND next_retry_at <= " + b.T(p.Now) + " AND ROWNUM = 1")
}

// eventsClaimUpdate flips the rows the claim's cursor locked to IN_PROCESS
// with the claim's token and instance (claimed_by).
func (d *Dialect) eventsClaimUpdate(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.Events + " SET status = 'IN_PROCESS', claim_token = " +
		b.P(d.EncodeID(p.Token)) + ", claimed_at = " + b.T(p.Now) + ", claimed_by = " + b.P(sqlkit.Nullable(p.Instance)) +
		", updated_at = " + b.T(p.Now) +
		"\n WHERE " + idIn(&b, "id", ids, d))
}

// Claim implements dialects.Relay: open the claim cursor, fetch up to p.Limit
// rows (locking them), close it, flip them to IN_PROCESS by id, commit.
// Ordered (p.ByKey), the candidates are read first without locks
// (eventsClaimCandidates, which also serves as the idle probe), the cursor is
// eventsClaimLockCandidates, and the rows come in id order.
func (d *Dialect) Claim(ctx context.Context, db wsql.Beginner, p dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	lock := d.eventsClaimLock(p)
	limit := p.Limit
	var cands []sqlkit.Candidate
	if p.ByKey {
		var err error
		var cut bool
		if cands, cut, err = sqlkit.QueryCandidates(ctx, db, d.eventsClaimCandidates(p)); err != nil {
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
		lock, limit = d.eventsClaimLockCandidates(p, sqlkit.CandidateIDs(cands)), len(cands)
	} else if due, err := sqlkit.Exists(ctx, db, d.eventsClaimProbe(p)); err != nil || !due {
		return nil, err
	}
	var out []dialects.ClaimedEvent
	err := oracleTx.Run(ctx, db, func(tx wsql.Tx) error {
		events, err := sqlkit.QueryClaimed(ctx, tx, lock, limit)
		if err != nil || len(events) == 0 {
			return err
		}
		if p.ByKey {
			if events = sqlkit.Claimable(cands, events, p.Limit); len(events) == 0 {
				return nil
			}
		}
		if _, err := sqlkit.ExecAffected(ctx, tx, d.eventsClaimUpdate(p, sqlkit.ClaimedIDs(events))); err != nil {
			return err
		}
		out = events
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eventsNextDue is NextDue's statement: the first entry later than after of the
// type's range of the claim index outbox_events_due_idx (status,
// event_type, next_retry_at, id), read in order under ROWNUM, one index
// probe however many rows wait.
// Only a row that was delayed or retried counts (next_retry_at later than
// created_at): a plain event is due when written, and its arrival is the
// wake-up's and the pace's business. Counted, an arrival cut every sleep
// of a relay that polls, so that its adaptive pace grew with no full batch
// to reset it (bench latency, polling only: p50 255 ms became 547-1,587 ms;
// docs/delay.md). created_at is read from the table for the entries after
// the bound only: the rows written since the last claim began.
func (d *Dialect) eventsNextDue(eventType string, now time.Time) dialects.Query {
	var b binder
	q := claimSQL{}.FirstRows(`SELECT next_retry_at FROM `+d.tables.Events+`
 WHERE status = 'PENDING' AND event_type = `+b.P(eventType)+` AND next_retry_at > `+b.T(now)+` AND next_retry_at > created_at
 ORDER BY next_retry_at`, "1")
	return b.Query(q)
}

// NextDue implements dialects.NextDueReader.
func (d *Dialect) NextDue(ctx context.Context, db wsql.ContextExecutor, eventType string, now time.Time) (time.Time, bool, error) {
	return sqlkit.QueryNextDue(ctx, db, d.eventsNextDue(eventType, now), nil)
}
