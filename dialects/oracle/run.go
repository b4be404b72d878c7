package oracle

import (
	"context"
	"fmt"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// oracleTx are the options of the dialect's transactions: none. Oracle's
// default isolation is READ COMMITTED, the level the relay needs, and go-ora
// (v2.8.24, Connection.BeginTx) refuses any TxOptions.Isolation other than
// the default with "only support default value for isolation", so
// an explicit READ COMMITTED would fail every transaction. A deadlock victim
// (ORA-00060) is run again.
var oracleTx = sqlkit.Tx{IsDeadlock: isDeadlock}

// oracleMaxIDsPerStatement bounds the ids of one statement built from a
// caller's list, well within 65,535 binds.
const oracleMaxIDsPerStatement = 30000

// Claim implements Dialect: open the claim cursor, fetch up to p.Limit rows
// (locking them), close it, flip them to IN_PROCESS by id, commit. Ordered
// (p.ByKey), the candidates are read first without locks
// (eventsClaimCandidates, which also serves as the idle probe), the cursor
// is eventsClaimLockCandidates, and the rows come in id order.
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

// MarkProcessed implements Dialect: the guarded update in one transaction;
// when it affected fewer rows than ids (a stale finalize), that transaction
// is rolled back and the rows still this claim's are locked
// (eventsLockClaimed) and marked, so exactly the ids this call marked are
// returned (markProcessed in run.go).
func (d *Dialect) MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.MarkProcessed(ctx, db, oracleTx, oracleMaxIDsPerStatement, ids,
		func(ids []oncebox.EventID) dialects.Query { return d.eventsMarkProcessed(token, ids, now) },
		func(ids []oncebox.EventID) dialects.Query { return d.eventsLockClaimed(token, ids) })
}

// MarkProcessedClaims implements ClaimsFinalizer: the eventsMarkProcessed
// statements of every claim in one transaction, one commit; on a stale
// finalize, MarkProcessed per claim.
func (d *Dialect) MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []dialects.ClaimIDs, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.MarkProcessedClaims(ctx, db, oracleTx, oracleMaxIDsPerStatement, claims,
		func(token oncebox.EventID, ids []oncebox.EventID) dialects.Query {
			return d.eventsMarkProcessed(token, ids, now)
		},
		func(token oncebox.EventID, ids []oncebox.EventID) ([]oncebox.EventID, error) {
			return d.MarkProcessed(ctx, db, token, ids, now)
		})
}

// MoveToDLQ implements Dialect: lock up to limit FAILED rows through the
// cursor, copy them into the DLQ, delete them, commit.
func (d *Dialect) MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	if found, err := sqlkit.Exists(ctx, db, d.eventsFailedProbe()); err != nil || !found {
		return 0, err
	}
	moved := 0
	err := oracleTx.Run(ctx, db, func(tx wsql.Tx) error {
		moved = 0
		ids, err := oracleLockIDs(ctx, tx, d.eventsMoveLock(), limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		return sqlkit.Chunks(ids, oracleMaxIDsPerStatement, func(part []oncebox.EventID) error {
			n, err := sqlkit.ExecAffected(ctx, tx, d.eventsMoveCopy(part, now))
			if err != nil {
				return err
			}
			if _, err := sqlkit.ExecAffected(ctx, tx, d.eventsMoveDelete(part)); err != nil {
				return err
			}
			moved += int(n)
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

// oracleLockIDs runs a lock cursor and fetches up to limit ids.
func oracleLockIDs(ctx context.Context, tx wsql.ContextExecutor, q dialects.Query, limit int) ([]oncebox.EventID, error) {
	rows, err := tx.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []oncebox.EventID
	for len(out) < limit && rows.Next() {
		var id oncebox.EventID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, id)
	}
	return out, sqlkit.RowsErr(rows)
}

// TransferDLQToOutbox implements Dialect: lock up to limit TO_RETRY rows
// through the cursor, compute in Go what PostgreSQL's statement computes
// (event id = event_id or the row's own id; metadata gains oncebox_event_id
// and oncebox_event_type; rows sharing an event id become one event, the
// latest moved winning), re-arm or insert each event in the outbox, delete
// the DLQ rows, commit. Returns the DLQ rows moved.
func (d *Dialect) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	if found, err := sqlkit.Exists(ctx, db, d.dLQToRetryProbe()); err != nil || !found {
		return 0, err
	}
	moved := 0
	err := oracleTx.Run(ctx, db, func(tx wsql.Tx) error {
		moved = 0
		locked, err := d.lockTransferRows(ctx, tx, limit)
		if err != nil || len(locked) == 0 {
			return err
		}
		events, err := sqlkit.TransferEvents(locked)
		if err != nil {
			return err
		}
		for _, e := range events {
			n, err := sqlkit.ExecAffected(ctx, tx, d.dLQTransferRearm(e, now))
			if err != nil {
				return err
			}
			if n == 0 {
				if _, err := sqlkit.ExecAffected(ctx, tx, d.dLQTransferInsert(e, now)); err != nil {
					return err
				}
			}
		}
		ids := make([]oncebox.EventID, len(locked))
		for i, r := range locked {
			ids[i] = r.ID
		}
		return sqlkit.Chunks(ids, oracleMaxIDsPerStatement, func(part []oncebox.EventID) error {
			n, err := sqlkit.ExecAffected(ctx, tx, d.dLQTransferDelete(part))
			moved += int(n)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

func (d *Dialect) lockTransferRows(ctx context.Context, tx wsql.ContextExecutor, limit int) ([]sqlkit.TransferRow, error) {
	q := d.dLQTransferLock()
	rows, err := tx.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlkit.TransferRow
	for len(out) < limit && rows.Next() {
		var r sqlkit.TransferRow
		if err := rows.Scan(&r.ID, &r.EventID, &r.EventType, &r.Topic, &r.Key, &r.MessageUUID,
			&r.Payload, &r.Metadata, &r.CreatedAt, &r.MovedAt); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, r)
	}
	return out, sqlkit.RowsErr(rows)
}

// AcquireLease implements Dialect with the one MERGE of leaseAcquire. Two
// instances inserting the first lease at once: the second waits, then fails
// with ORA-00001, which means "not taken".
func (d *Dialect) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.leaseAcquire(l))
	if isUniqueViolation(err) {
		return false, nil
	}
	return n == 1, err
}

// InboxRecordMany implements Dialect: one InboxInsert MERGE per id in the
// caller's transaction (one round trip per id), whose affected count tells
// new (1) or present (0). An id a concurrent transaction inserted and
// committed first makes the MERGE wait, then fail with ORA-00001: not new.
// Oracle rolls back only the failed statement, so the transaction goes on.
func (d *Dialect) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	var out []string
	for _, id := range ids {
		n, err := sqlkit.ExecAffected(ctx, tx, d.InboxInsert(consumer, id, now))
		if isUniqueViolation(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 1 {
			out = append(out, id)
		}
	}
	return out, nil
}

// isUniqueViolation reports ORA-00001 (unique constraint violated).
func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ORA-00001")
}

// Exec implements Dialect: q in its own transaction (READ COMMITTED, the
// default).
func (d *Dialect) Exec(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error) {
	var n int64
	err := oracleTx.Run(ctx, db, func(tx wsql.Tx) error {
		var err error
		n, err = sqlkit.ExecAffected(ctx, tx, q)
		return err
	})
	return n, err
}
