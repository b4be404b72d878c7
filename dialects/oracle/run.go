package oracle

import (
	"context"
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

// MarkProcessed implements dialects.Relay: the guarded update in one
// transaction; when it affected fewer rows than ids (a stale finalize), that
// transaction is rolled back and the rows still this claim's are locked
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

// MoveToDLQ implements dialects.Relay: lock up to limit FAILED rows through
// the cursor, copy them into the DLQ, delete them, commit.
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

// AcquireLease implements dialects.Relay with the one MERGE of leaseAcquire.
// Two instances inserting the first lease at once: the second waits, then
// fails with ORA-00001, which means "not taken".
func (d *Dialect) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.leaseAcquire(l))
	if isUniqueViolation(err) {
		return false, nil
	}
	return n == 1, err
}
