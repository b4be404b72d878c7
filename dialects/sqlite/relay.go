package sqlite

import (
	"context"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// eventsMarkProcessed is MarkProcessed's statement for at most
// maxIDsPerStatement ids. The claim token guards the update: a row
// recovered and claimed again by another instance has a new token, so a
// late finalize of the old claim changes nothing. It returns the ids it
// marked, so that only those are reported as sent (the stale-finalize
// guard: RETURNING gives exactly the rows this statement changed).
func (d *Dialect) eventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	var b binder
	set := "DELETE FROM " + d.tables.Events // DeleteConfirmed
	if !d.deleteConfirmed {
		set = "UPDATE " + d.tables.Events + " SET status = 'PROCESSED', updated_at = " + b.T(now)
	}
	in := b.In("id", d.ids(ids))
	return b.Query(set + "\n WHERE " + in + " AND claim_token = " + b.P(d.EncodeID(token)) + " AND status = 'IN_PROCESS'\nRETURNING id")
}

// MarkProcessed implements dialects.Relay: eventsMarkProcessed, one
// statement (its own transaction), or one per maxIDsPerStatement ids in
// one transaction.
func (d *Dialect) MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) <= maxIDsPerStatement {
		return sqlkit.QueryIDs(ctx, db, d.eventsMarkProcessed(token, ids, now))
	}
	var out []oncebox.EventID
	err := sqlkit.Tx{}.Run(ctx, db, func(tx wsql.Tx) error {
		out = out[:0]
		return d.markIn(ctx, tx, token, ids, now, &out)
	})
	return out, err
}

// markIn runs eventsMarkProcessed over ids, a chunk at a time, in tx,
// appending the ids marked to out.
func (d *Dialect) markIn(ctx context.Context, tx wsql.ContextExecutor, token oncebox.EventID, ids []oncebox.EventID, now time.Time, out *[]oncebox.EventID) error {
	return sqlkit.Chunks(ids, maxIDsPerStatement, func(part []oncebox.EventID) error {
		marked, err := sqlkit.QueryIDs(ctx, tx, d.eventsMarkProcessed(token, part, now))
		*out = append(*out, marked...)
		return err
	})
}

// MarkProcessedClaims implements dialects.ClaimsFinalizer: each claim's
// eventsMarkProcessed in one transaction, so one commit (one fsync of the
// WAL) for several batches. Each statement keeps its claim's token guard.
func (d *Dialect) MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []dialects.ClaimIDs, now time.Time) ([]oncebox.EventID, error) {
	var out []oncebox.EventID
	err := sqlkit.Tx{}.Run(ctx, db, func(tx wsql.Tx) error {
		out = out[:0]
		for _, c := range claims {
			if len(c.IDs) == 0 {
				continue
			}
			if err := d.markIn(ctx, tx, c.Token, c.IDs, now, &out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eventsMarkFailed is Relay.MarkFailed's statement: each row gets its own
// retry count, next retry time and status from a VALUES list joined in one
// UPDATE … FROM (SQLite names its columns column1 … column5), under the
// same claim-token guard as eventsMarkProcessed. Five parameters a row:
// at most maxFailedRows rows (MarkFailed splits a larger batch).
func (d *Dialect) eventsMarkFailed(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	var b binder
	head := "UPDATE " + d.tables.Events + ` AS e
   SET status = u.column2, retry_count = u.column3, next_retry_at = u.column4,
       last_error = u.column5, first_failed_at = COALESCE(e.first_failed_at, ` + b.T(now) + `),
       claim_token = NULL, claimed_at = NULL, updated_at = ` + b.T(now)
	var v strings.Builder
	for i, r := range rows {
		if i > 0 {
			v.WriteString(", ")
		}
		v.WriteString("(" + b.P(d.EncodeID(r.ID)) + ", " + b.P(string(r.Status)) + ", " + b.P(r.RetryCount) + ", " +
			b.T(r.NextRetryAt) + ", " + b.P(sqlkit.ErrorText(r.Error)) + ")")
	}
	return b.Query(head + `
  FROM (VALUES ` + v.String() + `) AS u
 WHERE e.id = u.column1 AND e.claim_token = ` + b.P(d.EncodeID(token)) + ` AND e.status = 'IN_PROCESS'`)
}

// maxFailedRows is the most rows one eventsMarkFailed takes: five
// parameters a row, beside two, under sqliteMaxBindParams.
const maxFailedRows = 6000 // 30,004 parameters

// MarkFailed implements dialects.Relay: eventsMarkFailed on its own, or,
// for a batch larger than maxFailedRows (up to oncebox.MaxBatchSize, whose
// 50,000 parameters no statement takes), one statement per maxFailedRows
// rows in one transaction.
func (d *Dialect) MarkFailed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) (int64, error) {
	if len(rows) <= maxFailedRows {
		return sqlkit.ExecAffected(ctx, db, d.eventsMarkFailed(token, rows, now))
	}
	var n int64
	err := sqlkit.Tx{}.Run(ctx, db, func(tx wsql.Tx) error {
		n = 0
		return sqlkit.Chunks(rows, maxFailedRows, func(part []dialects.FailedEvent) error {
			k, err := sqlkit.ExecAffected(ctx, tx, d.eventsMarkFailed(token, part, now))
			n += k
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// eventsRelease is Relay.ReleaseClaims's statement: rows of a claim go back
// to PENDING as they were, without counting an attempt (broker unreachable,
// shutdown).
func (d *Dialect) eventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	var b binder
	set := "UPDATE " + d.tables.Events + " SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = " + b.T(now)
	in := b.In("id", d.ids(ids))
	return b.Query(set + "\n WHERE " + in + " AND claim_token = " + b.P(d.EncodeID(token)) + " AND status = 'IN_PROCESS'")
}

// eventsFailedProbe tells, with a plain read, whether a FAILED row waits:
// an idle MoveToDLQ stops there without taking the write lock.
func (d *Dialect) eventsFailedProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.Events + " WHERE status = 'FAILED' LIMIT 1"}
}

// failedBatch is the subquery of the FAILED rows MoveToDLQ moves: the
// same rows for both of its statements, read under one write lock.
func (d *Dialect) failedBatch(limit string) string {
	return `SELECT id FROM ` + d.tables.Events + `
               WHERE status = 'FAILED' ORDER BY updated_at, id LIMIT ` + limit
}

// eventsCopyToDLQ is the first statement of MoveToDLQ: up to limit FAILED
// rows copied into the DLQ table (status MOVED, source publisher, the DLQ
// row's id is the event id). Index: (updated_at) WHERE status = 'FAILED'.
func (d *Dialect) eventsCopyToDLQ(now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', '', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, ?1, ?1
  FROM ` + d.tables.Events + `
 WHERE id IN (` + d.failedBatch("?2") + `)`,
		Args: []any{us(now), limit},
	}
}

// eventsDeleteMoved is the second statement of MoveToDLQ: delete the rows
// the first copied (the same subquery, in the same write transaction).
func (d *Dialect) eventsDeleteMoved(limit int) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.Events + ` WHERE id IN (` + d.failedBatch("?1") + `)`,
		Args: []any{limit},
	}
}

// MoveToDLQ implements dialects.Relay: eventsFailedProbe, then
// eventsCopyToDLQ and eventsDeleteMoved in one transaction, so that a
// crash leaves each row either in the outbox or in the DLQ.
func (d *Dialect) MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if found, err := sqlkit.Exists(ctx, db, d.eventsFailedProbe()); err != nil || !found {
		return 0, err
	}
	var moved int64
	err := sqlkit.Tx{}.Run(ctx, db, func(tx wsql.Tx) error {
		n, err := sqlkit.ExecAffected(ctx, tx, d.eventsCopyToDLQ(now, limit))
		if err != nil {
			return err
		}
		moved = n
		_, err = sqlkit.ExecAffected(ctx, tx, d.eventsDeleteMoved(limit))
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(moved), nil
}

// eventsDeleteProcessed is Relay.DeleteProcessed's statement: up to limit
// PROCESSED rows last updated before cutoff. Index: the partial index
// (updated_at) WHERE status = 'PROCESSED'.
func (d *Dialect) eventsDeleteProcessed(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.Events + ` WHERE id IN (SELECT id FROM ` + d.tables.Events + `
 WHERE status = 'PROCESSED' AND updated_at < ?1 LIMIT ?2)`,
		Args: []any{us(cutoff), limit},
	}
}

// leaseAcquire is AcquireLease's statement: take the lease when nobody holds
// it or when the holder's lease has run out; one row changed means taken
// (an upsert whose WHERE is false changes none).
func (d *Dialect) leaseAcquire(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Jobs + ` AS j (name, locked_by, locked_at, lock_until) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, locked_at = excluded.locked_at,
       lock_until = excluded.lock_until
 WHERE j.lock_until <= excluded.locked_at`,
		Args: []any{l.Name, l.Owner, us(l.LockedAt), us(l.Until)},
	}
}

// AcquireLease implements dialects.Relay with the one statement of leaseAcquire.
func (d *Dialect) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.leaseAcquire(l))
	return n == 1, err
}

// leaseRelease is Relay.ReleaseLease's statement: shorten the lease held by
// l.Owner since l.LockedAt to end at l.Until (the at-least time, or now).
// The times are whole microseconds on both sides, so the equality holds.
func (d *Dialect) leaseRelease(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.Jobs + " SET lock_until = ?1 WHERE name = ?2 AND locked_by = ?3 AND locked_at = ?4",
		Args: []any{us(l.Until), l.Name, l.Owner, us(l.LockedAt)},
	}
}

// eventsDueTypes is Relay.DueTypes's statement: a recursive CTE that jumps
// from one event type to the next through the claim index (event_type,
// next_retry_at, id) WHERE status = 'PENDING' (min() after the previous
// type: one probe), n stopping it after limit types; then, for each
// type, one probe for its first entry due at now.
func (d *Dialect) eventsDueTypes(now time.Time, after string, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM ` + d.tables.Events + `
     WHERE status = 'PENDING' AND event_type > ?2
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM ` + d.tables.Events + ` e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < ?3
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM ` + d.tables.Events + ` e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= ?1)
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type`,
		Args: []any{us(now), after, limit},
	}
}
