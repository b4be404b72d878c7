package mysql

import (
	"time"

	"context"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

const claimColumns = "id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at"

// eventsClaimSelect is the first statement of Claim: lock up to Limit due
// PENDING rows of the type that no other claimer holds, in (next_retry_at,
// id) order. Index: (status, event_type, next_retry_at), to which InnoDB
// appends the primary key id, gives the rows in order without a sort; SKIP
// LOCKED passes over the rows other claimers hold, never waiting.
func (d *Dialect) eventsClaimSelect(p dialects.ClaimParams) dialects.Query {
	return dialects.Query{
		SQL: "SELECT " + claimColumns + " FROM " + d.tables.Events + `
 WHERE status = 'PENDING' AND event_type = ? AND next_retry_at <= ?
 ORDER BY next_retry_at, id
 LIMIT ?
   FOR UPDATE SKIP LOCKED`,
		Args: []any{p.EventType, sqlkit.MicroUTC(p.Now), p.Limit},
	}
}

// eventsClaimUpdate is the second statement of Claim: flip the locked rows
// to IN_PROCESS with the claim's token and instance (claimed_by).
func (d *Dialect) eventsClaimUpdate(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	now := sqlkit.MicroUTC(p.Now)
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'IN_PROCESS', claim_token = ?, claimed_at = ?, claimed_by = ?, updated_at = ?
 WHERE id IN ` + inList(len(ids)),
		Args: append([]any{d.EncodeID(p.Token), now, sqlkit.Nullable(p.Instance), now}, d.ids(ids)...),
	}
}

// eventsClaimProbe tells, without locking, whether a row of the type is
// due: the one statement an idle poll costs. Index: (status, event_type,
// next_retry_at), covering.
func (d *Dialect) eventsClaimProbe(p dialects.ClaimParams) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT 1 FROM " + d.tables.Events + ` WHERE status = 'PENDING' AND event_type = ? AND next_retry_at <= ? LIMIT 1`,
		Args: []any{p.EventType, sqlkit.MicroUTC(p.Now)},
	}
}

// eventsClaimCandidates is the first statement of an ordered claim
// (p.ByKey): a plain read, without locks, of the candidates of
// sqlkit.OrderedCandidates (id, partition_key, next_retry_at) in (next_retry_at,
// id) order. Not a locking read: inside SELECT … FOR UPDATE SKIP LOCKED,
// InnoDB reads a probe that the optimizer turns into a join (MySQL 8's
// antijoin) with locks, so a row another claimer has locked but not yet
// flipped would be skipped and its successor would look like the first
// of its key (docs/ordering.md). Read here, a row locked by another
// claimer is still PENDING in the committed state and stops its key. One
// statement, so one snapshot for the window, the busy keys and the stops.
// It doubles as the idle probe. Indexes: (status, event_type,
// next_retry_at) for the window and the busy keys, (event_type,
// partition_key, status) (migration 4) for the stop probes.
func (d *Dialect) eventsClaimCandidates(p dialects.ClaimParams) dialects.Query {
	var b binder
	ctes, cand := sqlkit.OrderedCandidates(claimSQL{}, d.tables, &b, p)
	return dialects.Query{SQL: sqlkit.CandidatesRead(p, ctes, cand, sqlkit.WindowCut(claimSQL{}, d.tables, &b, p)), Args: b.Args}
}

// claimSQL is MySQL's and MariaDB's part of the ordered claim
// (sqlkit.ClaimSQL).
type claimSQL struct{}

func (claimSQL) FirstRows(query, n string) string { return sqlkit.LimitClause(query, n) }

func (claimSQL) FirstOf(col, from, where string) string {
	return sqlkit.OrderLimitFirstOf(col, from, where)
}

func (claimSQL) Materialized() string { return "" }

// InProcessHint: MariaDB 10.11 read the busy keys through the key index,
// every row of the type (1,000,000 at 1,000 rows in flight, 1.2 s,
// measured): the (status, claimed_at) index reads the rows in flight only.
func (claimSQL) InProcessHint() string { return " FORCE INDEX (outbox_events_claimed_idx)" }

func (claimSQL) HeadProbe() string { return "" }

func (claimSQL) LazyWindow() bool { return false }

func (claimSQL) KeyWalk() sqlkit.KeyWalk { return sqlkit.WalkGroupBy }

// eventsClaimWalk is the third statement of an ordered claim, run only
// when eventsClaimCandidates reported its window cut and found fewer
// candidates than p.Limit: the walk of the type's keys (sqlkit.OrderedWalk), a
// plain read like the candidates'. Index: (event_type, partition_key,
// status) + id, a loose index scan ("Using index for group-by"), then
// primary key lookups of the heads.
func (d *Dialect) eventsClaimWalk(p dialects.ClaimParams) dialects.Query {
	var b binder
	return dialects.Query{SQL: sqlkit.WalkRead(claimSQL{}, d.tables, &b, p), Args: b.Args}
}

// eventsClaimLockCandidates is the second statement of an ordered claim:
// lock the candidates eventsClaimCandidates found, skipping those another
// claimer holds, re-checking on each row's latest committed version (a
// locking read) that it is still PENDING and due. Claim keeps a locked row
// only when every candidate of its key before it was locked too
// (keepKeyPrefixes). Primary key lookups.
func (d *Dialect) eventsClaimLockCandidates(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL: "SELECT " + claimColumns + " FROM " + d.tables.Events + `
 WHERE id IN ` + inList(len(ids)) + ` AND status = 'PENDING' AND next_retry_at <= ?
 ORDER BY next_retry_at, id
   FOR UPDATE SKIP LOCKED`,
		Args: append(d.ids(ids), sqlkit.MicroUTC(p.Now)),
	}
}

// Claim implements dialects.Relay: eventsClaimSelect then eventsClaimUpdate
// in one READ COMMITTED transaction, committed before it returns. An idle
// poll stops at eventsClaimProbe: one plain read instead of the transaction's
// four round trips (SET TRANSACTION, START TRANSACTION, SELECT, COMMIT).
// Ordered (p.ByKey), eventsClaimCandidates takes the probe's place,
// eventsClaimLockCandidates the select's, and the rows come in id order.
func (d *Dialect) Claim(ctx context.Context, db wsql.Beginner, p dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	lock := d.eventsClaimSelect(p)
	var cands []sqlkit.Candidate
	if p.ByKey {
		var err error
		var cut bool
		if cands, cut, err = sqlkit.QueryCandidates(ctx, db, d.eventsClaimCandidates(p)); err != nil {
			return nil, sqlkit.ScanHint(err)
		}
		if cut && len(cands) < p.Limit {
			heads, _, err := sqlkit.QueryCandidates(ctx, db, d.eventsClaimWalk(p))
			if err != nil {
				return nil, sqlkit.ScanHint(err)
			}
			cands = sqlkit.AppendWalked(cands, heads)
		}
		if len(cands) == 0 {
			return nil, nil
		}
		lock = d.eventsClaimLockCandidates(p, sqlkit.CandidateIDs(cands))
	} else if due, err := sqlkit.Exists(ctx, db, d.eventsClaimProbe(p)); err != nil || !due {
		return nil, err
	}
	var out []dialects.ClaimedEvent
	err := relayTx.Run(ctx, db, func(tx wsql.Tx) error {
		rows, err := sqlkit.QueryClaimed(ctx, tx, lock, 0)
		if err != nil || len(rows) == 0 {
			return sqlkit.ScanHint(err)
		}
		if p.ByKey {
			if rows = sqlkit.Claimable(cands, rows, p.Limit); len(rows) == 0 {
				return nil
			}
		}
		err = sqlkit.Chunks(sqlkit.ClaimedIDs(rows), mysqlMaxIDsPerStatement, func(ids []oncebox.EventID) error {
			_, err := sqlkit.ExecAffected(ctx, tx, d.eventsClaimUpdate(p, ids))
			return err
		})
		out = rows
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eventsNextDue is NextDue's statement: the first entry later than after of the
// type's range of the claim index (status, event_type, next_retry_at), one
// index probe however many rows wait.
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
 WHERE status = 'PENDING' AND event_type = ? AND next_retry_at > ? AND next_retry_at > created_at
 ORDER BY next_retry_at
 LIMIT 1`,
		Args: []any{eventType, sqlkit.MicroUTC(now)},
	}
}

// NextDue implements dialects.NextDueReader.
func (d *Dialect) NextDue(ctx context.Context, db wsql.ContextExecutor, eventType string, now time.Time) (time.Time, bool, error) {
	return sqlkit.QueryNextDue(ctx, db, d.eventsNextDue(eventType, now), nil)
}
