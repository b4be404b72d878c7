package mysql

import (
	"context"
	"strconv"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// relayTx is how the relay's transactions run on MySQL: READ COMMITTED,
// whatever the server's default, so that locking reads take record locks
// only, never gap locks, and see rows committed by other instances since the
// transaction began; a deadlock victim (1213) is run again.
var relayTx = sqlkit.Tx{Options: sqlkit.ReadCommitted, IsDeadlock: isDeadlock}

// eventsMarkProcessed marks ids PROCESSED where the claim token matches. The
// token guards the update: a row recovered and claimed again by another
// instance has a new token, so a late finalize of the old claim changes
// nothing. The token stays on the row, as on PostgreSQL.
func (d *Dialect) eventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	if d.deleteConfirmed {
		return dialects.Query{
			SQL: "DELETE FROM " + d.tables.Events + `
 WHERE id IN ` + inList(len(ids)) + ` AND claim_token = ? AND status = 'IN_PROCESS'`,
			Args: append(d.ids(ids), d.EncodeID(token)),
		}
	}
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PROCESSED', updated_at = ?
 WHERE id IN ` + inList(len(ids)) + ` AND claim_token = ? AND status = 'IN_PROCESS'`,
		Args: append(append([]any{sqlkit.MicroUTC(now)}, d.ids(ids)...), d.EncodeID(token)),
	}
}

// eventsLockClaimed locks which of ids are still IN_PROCESS under token:
// the rows a finalize of that claim may mark. MarkProcessed's slow path.
func (d *Dialect) eventsLockClaimed(token oncebox.EventID, ids []oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL: "SELECT id FROM " + d.tables.Events + ` WHERE id IN ` + inList(len(ids)) +
			` AND claim_token = ? AND status = 'IN_PROCESS' FOR UPDATE`,
		Args: append(d.ids(ids), d.EncodeID(token)),
	}
}

// MarkProcessed implements dialects.Relay: eventsMarkProcessed in one READ
// COMMITTED transaction; when it changed fewer rows than ids (a stale
// finalize), that transaction is rolled back and the rows still this claim's
// are locked (eventsLockClaimed) and marked, so that exactly the ids this
// call marked are returned.
func (d *Dialect) MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.MarkProcessed(ctx, db, relayTx, mysqlMaxIDsPerStatement, ids,
		func(ids []oncebox.EventID) dialects.Query { return d.eventsMarkProcessed(token, ids, now) },
		func(ids []oncebox.EventID) dialects.Query { return d.eventsLockClaimed(token, ids) })
}

// MarkProcessedClaims implements ClaimsFinalizer: the eventsMarkProcessed
// statements of every claim in one READ COMMITTED transaction, one commit;
// on a stale finalize, MarkProcessed per claim.
func (d *Dialect) MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []dialects.ClaimIDs, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.MarkProcessedClaims(ctx, db, relayTx, mysqlMaxIDsPerStatement, claims,
		func(token oncebox.EventID, ids []oncebox.EventID) dialects.Query {
			return d.eventsMarkProcessed(token, ids, now)
		},
		func(token oncebox.EventID, ids []oncebox.EventID) ([]oncebox.EventID, error) {
			return d.MarkProcessed(ctx, db, token, ids, now)
		})
}

// eventsMarkFailed is Relay.MarkFailed's statement: one UPDATE giving each
// row its own status, retry count, next retry time and error through CASE id
// WHEN … THEN … per column, under the same claim-token guard as
// eventsMarkProcessed. The ids are written as hexadecimal literals (built
// from their bytes, so safe in the text) rather than bound: a batch of
// MaxBatchSize (10,000) failures then takes 3 parameters per row, 30,003 in
// all, under the limit of 65,535, where binding the ids would take 9 per row.
func (d *Dialect) eventsMarkFailed(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	now = sqlkit.MicroUTC(now)
	args := make([]any, 0, 3*len(rows)+3)
	var b strings.Builder
	b.Grow(200 + len(rows)*200)
	b.WriteString("UPDATE " + d.tables.Events + " SET")
	column := func(name string, value func(dialects.FailedEvent) (string, any)) {
		b.WriteString("\n    " + name + " = CASE id")
		for _, r := range rows {
			text, arg := value(r)
			b.WriteString(" WHEN " + hexID(r.ID) + " THEN " + text)
			if arg != nil {
				args = append(args, arg)
			}
		}
		b.WriteString(" ELSE " + name + " END,")
	}
	column("status", func(r dialects.FailedEvent) (string, any) { return "?", string(r.Status) })
	column("retry_count", func(r dialects.FailedEvent) (string, any) { return strconv.Itoa(r.RetryCount), nil })
	column("next_retry_at", func(r dialects.FailedEvent) (string, any) { return "?", sqlkit.MicroUTC(r.NextRetryAt) })
	column("last_error", func(r dialects.FailedEvent) (string, any) { return "?", sqlkit.ErrorText(r.Error) })
	b.WriteString("\n    first_failed_at = COALESCE(first_failed_at, ?), claim_token = NULL, claimed_at = NULL, updated_at = ?")
	b.WriteString("\n WHERE id IN (")
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(hexID(r.ID))
	}
	if len(rows) == 0 {
		b.WriteString("NULL")
	}
	b.WriteString(") AND claim_token = ? AND status = 'IN_PROCESS'")
	args = append(args, now, now, d.EncodeID(token))
	return dialects.Query{SQL: b.String(), Args: args}
}

// eventsRelease is Relay.ReleaseClaims's statement: rows of a claim go back
// to PENDING as they were, without counting an attempt (broker unreachable,
// shutdown).
func (d *Dialect) eventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = ?
 WHERE id IN ` + inList(len(ids)) + ` AND claim_token = ? AND status = 'IN_PROCESS'`,
		Args: append(append([]any{sqlkit.MicroUTC(now)}, d.ids(ids)...), d.EncodeID(token)),
	}
}

// eventsRecover returns up to limit rows IN_PROCESS since before cutoff to
// PENDING without counting an attempt, and clears their claim token so that
// the stuck claimer's late finalize matches nothing. No run method runs it:
// the relay recovers with eventsRecoverStale, this statement with the
// heartbeat bound added. It is kept, with its golden file, as the plain
// form of the recovery.
//
// MySQL refuses LIMIT in an IN subquery and has no SKIP LOCKED on UPDATE; a
// derived table may carry both, and is materialized before the join. Locks:
// SKIP LOCKED passes over rows a finalizing claimer is updating right now
// (they are no longer stuck), as on PostgreSQL. A plain UPDATE … ORDER BY …
// LIMIT deadlocked with MarkProcessed (measured): it locks the (status,
// claimed_at) entry and then waits for the row, while the finalizer holds
// the row and waits for the entry. Index: (status, claimed_at).
func (d *Dialect) eventsRecover(cutoff, now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` AS e
  JOIN (SELECT id FROM ` + d.tables.Events + `
         WHERE status = 'IN_PROCESS' AND claimed_at < ?
         ORDER BY claimed_at, id
         LIMIT ?
           FOR UPDATE SKIP LOCKED) AS stuck ON e.id = stuck.id
   SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.updated_at = ?
 WHERE e.status = 'IN_PROCESS'`,
		Args: []any{sqlkit.MicroUTC(cutoff), limit, sqlkit.MicroUTC(now)},
	}
}

// eventsMoveSelect is the first statement of MoveToDLQ: lock up to limit
// FAILED rows, oldest first. Index: (status, updated_at).
func (d *Dialect) eventsMoveSelect(limit int) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT id FROM " + d.tables.Events + ` WHERE status = 'FAILED' ORDER BY updated_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
		Args: []any{limit},
	}
}

// eventsCopyToDLQ is the second statement of MoveToDLQ: copy the locked rows
// into the DLQ table (status MOVED, source publisher, the DLQ row's id is
// the event id).
func (d *Dialect) eventsCopyToDLQ(ids []oncebox.EventID, now time.Time) dialects.Query {
	now = sqlkit.MicroUTC(now)
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', '', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, ?, ?
  FROM ` + d.tables.Events + `
 WHERE id IN ` + inList(len(ids)),
		Args: append([]any{now, now}, d.ids(ids)...),
	}
}

// eventsDelete is the last statement of MoveToDLQ, once per copied row:
// delete it by primary key.
//
// Locks: one row per statement, by design. A DELETE, unlike an UPDATE, locks
// every row it reads even at READ COMMITTED, and WHERE id IN (…) is planned
// from the table's statistics: on a table whose statistics say it is small
// (fresh, or cleaned up) the optimizer scans the whole table or index, even
// with FORCE INDEX (PRIMARY), and waits on the rows other instances hold.
// Four relays moving rows at once deadlocked that way (measured,
// TestMySQLFourPollersFailToTheDLQAndRetryFromIt); id = ? is always a
// primary key lookup.
func (d *Dialect) eventsDelete(id oncebox.EventID) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Events + " WHERE id = ?", Args: []any{d.EncodeID(id)}}
}

// deleteEach runs del for each id in tx and returns the rows deleted.
func deleteEach(ctx context.Context, tx wsql.Tx, ids []oncebox.EventID, del func(oncebox.EventID) dialects.Query) (int, error) {
	n := 0
	for _, id := range ids {
		k, err := sqlkit.ExecAffected(ctx, tx, del(id))
		if err != nil {
			return n, err
		}
		n += int(k)
	}
	return n, nil
}

// eventsFailedProbe tells, without locking, whether a FAILED row waits: an
// idle MoveToDLQ run stops there. Index: (status, updated_at).
func (d *Dialect) eventsFailedProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.Events + " WHERE status = 'FAILED' LIMIT 1"}
}

// MoveToDLQ implements dialects.Relay: eventsFailedProbe, then
// eventsMoveSelect, eventsCopyToDLQ and eventsDelete per row in one READ
// COMMITTED transaction: a crash leaves each row either in the outbox or in
// the DLQ.
func (d *Dialect) MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if found, err := sqlkit.Exists(ctx, db, d.eventsFailedProbe()); err != nil || !found {
		return 0, err
	}
	moved := 0
	err := relayTx.Run(ctx, db, func(tx wsql.Tx) error {
		moved = 0
		ids, err := sqlkit.QueryIDs(ctx, tx, d.eventsMoveSelect(limit))
		if err != nil {
			return err
		}
		return sqlkit.Chunks(ids, mysqlMaxIDsPerStatement, func(ids []oncebox.EventID) error {
			if _, err := sqlkit.ExecAffected(ctx, tx, d.eventsCopyToDLQ(ids, now)); err != nil {
				return err
			}
			n, err := deleteEach(ctx, tx, ids, d.eventsDelete)
			moved += n
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

// eventsDeleteProcessed is Relay.DeleteProcessed's statement: up to limit
// PROCESSED rows last updated before cutoff. Index: (status, updated_at).
func (d *Dialect) eventsDeleteProcessed(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.Events + ` WHERE status = 'PROCESSED' AND updated_at < ?
 ORDER BY updated_at, id
 LIMIT ?`,
		Args: []any{sqlkit.MicroUTC(cutoff), limit},
	}
}

// leaseInsert is the first statement of AcquireLease: the job's row, with a
// lease that has already ended, unless it exists.
func (d *Dialect) leaseInsert(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL:  "INSERT IGNORE INTO " + d.tables.Jobs + " (name, locked_by, locked_at, lock_until) VALUES (?, NULL, NULL, ?)",
		Args: []any{l.Name, sqlkit.MicroUTC(l.LockedAt)},
	}
}

// leaseTake is the second statement of AcquireLease: take the lease when
// the holder's has run out; one row affected means taken.
func (d *Dialect) leaseTake(l dialects.Lease) dialects.Query {
	at := sqlkit.MicroUTC(l.LockedAt)
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.Jobs + " SET locked_by = ?, locked_at = ?, lock_until = ? WHERE name = ? AND lock_until <= ?",
		Args: []any{l.Owner, at, sqlkit.MicroUTC(l.Until), l.Name, at},
	}
}

// AcquireLease implements dialects.Relay with leaseInsert then leaseTake,
// each atomic on its own: no transaction is needed.
func (d *Dialect) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error) {
	if _, err := sqlkit.ExecAffected(ctx, db, d.leaseInsert(l)); err != nil {
		return false, err
	}
	n, err := sqlkit.ExecAffected(ctx, db, d.leaseTake(l))
	return n == 1, err
}

// leaseRelease is Relay.ReleaseLease's statement: shorten the lease held by
// l.Owner since l.LockedAt to end at l.Until (the at-least time, or now).
func (d *Dialect) leaseRelease(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.Jobs + " SET lock_until = ? WHERE name = ? AND locked_by = ? AND locked_at = ?",
		Args: []any{sqlkit.MicroUTC(l.Until), l.Name, l.Owner, sqlkit.MicroUTC(l.LockedAt)},
	}
}

// eventsDueTypes is Relay.DueTypes's statement: a loose index scan ("Using
// index for group-by") over the claim index (status, event_type,
// next_retry_at): for each type, one probe for its first PENDING entry, whose
// next_retry_at is the type's earliest, compared with now. Every type with
// PENDING rows after after is probed (LIMIT does not stop the scan early: 300
// types, 0.8 ms on MariaDB 10.11), none of its rows is read. Two details keep
// MariaDB 10.11 on the loose scan, measured: GROUP BY names status too, and
// status is bounded by BETWEEN, since with status = 'PENDING' it chose a
// range scan of every PENDING row instead (200,000 rows waiting for a retry:
// 100–280 ms per idle poll, against 0.04 ms). A correlated probe (the
// recursive CTE PostgreSQL uses) is no better here: MariaDB reads it by ref
// on status alone, every PENDING row again.
func (d *Dialect) eventsDueTypes(now time.Time, after string, limit int) dialects.Query {
	return dialects.Query{
		SQL: `SELECT event_type, CASE WHEN MIN(next_retry_at) <= ? THEN 1 ELSE 0 END
  FROM ` + d.tables.Events + `
 WHERE status BETWEEN 'PENDING' AND 'PENDING' AND event_type > ?
 GROUP BY status, event_type
 ORDER BY status, event_type
 LIMIT ?`,
		Args: []any{sqlkit.MicroUTC(now), after, limit},
	}
}
