package oracle

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// dlqDeleteResolved is Relay.DeleteResolvedDLQ's statement: up to limit
// RESOLVED rows updated before cutoff, through a ROWNUM-bounded ROWID
// subquery; the outer predicate is checked again on each row, so a row an
// operator changed in between is not deleted. One leased instance runs the
// job: no SKIP LOCKED fairness is needed.
func (d *Dialect) dlqDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + "\n WHERE status = 'RESOLVED' AND updated_at < " + b.T(cutoff) +
		"\n   AND ROWID IN (SELECT ROWID FROM " + d.tables.DLQ +
		"\n                  WHERE status = 'RESOLVED' AND moved_at < " + b.T(cutoff) + " AND updated_at < " + b.T(cutoff) +
		" AND ROWNUM <= " + b.P(limit) + ")")
}

// dlqTransferLock is TransferDLQToOutbox's cursor over the TO_RETRY rows in
// (moved_at, id) order, FOR UPDATE SKIP LOCKED, fetched up to the limit.
// Index: (status, moved_at, id).
// dlqToRetryProbe tells, without locking, whether a TO_RETRY row waits: an
// idle TransferDLQToOutbox run stops there.
func (d *Dialect) dlqToRetryProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.DLQ + " WHERE status = 'TO_RETRY' AND ROWNUM = 1"}
}

func (d *Dialect) dlqTransferLock() dialects.Query {
	return dialects.Query{SQL: "SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at" +
		"\n  FROM " + d.tables.DLQ + "\n WHERE status = 'TO_RETRY'\n ORDER BY moved_at, id\n   FOR UPDATE SKIP LOCKED"}
}

// dlqTransferRearm re-arms the outbox row of r's event id, if any, as
// PostgreSQL's ON CONFLICT DO UPDATE does: content from the DLQ row,
// PENDING, retry_count 0, due now, claim and failure cleared. One affected
// row means it existed; otherwise dlqTransferInsert inserts it. (Two
// statements, not a MERGE: the payload and metadata are LOBs, whose binds
// beyond 32 KB go-ora sends as LONG, which a MERGE's USING subquery does not
// take.)
func (d *Dialect) dlqTransferRearm(r dialects.EventRow, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.Events + " SET event_type = " + b.P(r.EventType) + ", topic = " + b.P(r.Topic) +
		", partition_key = " + b.P(sqlkit.Nullable(r.Key)) + ",\n       message_uuid = " + b.P(r.MessageUUID) +
		", payload = " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", metadata = " + b.P(r.Metadata) +
		",\n       status = 'PENDING', retry_count = 0, next_retry_at = " + b.T(now) +
		",\n       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL, updated_at = " + b.T(now) +
		"\n WHERE id = " + b.P(d.EncodeID(r.ID)))
}

// dlqTransferInsert inserts r into the outbox as a PENDING event due now.
func (d *Dialect) dlqTransferInsert(r dialects.EventRow, now time.Time) dialects.Query {
	var b binder
	return b.Query("INSERT INTO " + d.tables.Events + " (" + sqlkit.EventInsertColumns + ")\nVALUES (" +
		b.P(d.EncodeID(r.ID)) + ", " + b.P(r.EventType) + ", " + b.P(r.Topic) + ", " + b.P(sqlkit.Nullable(r.Key)) + ", " +
		b.P(r.MessageUUID) + ", " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", " + b.P(r.Metadata) + ", 'PENDING', 0, " +
		b.T(now) + ", " + b.T(r.CreatedAt) + ", " + b.T(now) + ")")
}

// dlqTransferDelete removes the transferred rows from the DLQ.
func (d *Dialect) dlqTransferDelete(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE " + idIn(&b, "id", ids, d))
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

// TransferDLQToOutbox implements dialects.Relay: lock up to limit TO_RETRY
// rows through the cursor, compute in Go what PostgreSQL's statement computes
// (event id = event_id or the row's own id; metadata loses oncebox_event_id
// and oncebox_event_type, sent from the columns; rows sharing an event id become one event, the
// latest moved winning), re-arm or insert each event in the outbox, delete
// the DLQ rows, commit. Returns the DLQ rows moved.
func (d *Dialect) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	if found, err := sqlkit.Exists(ctx, db, d.dlqToRetryProbe()); err != nil || !found {
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
			n, err := sqlkit.ExecAffected(ctx, tx, d.dlqTransferRearm(e, now))
			if err != nil {
				return err
			}
			if n == 0 {
				if _, err := sqlkit.ExecAffected(ctx, tx, d.dlqTransferInsert(e, now)); err != nil {
					return err
				}
			}
		}
		ids := make([]oncebox.EventID, len(locked))
		for i, r := range locked {
			ids[i] = r.ID
		}
		return sqlkit.Chunks(ids, oracleMaxIDsPerStatement, func(part []oncebox.EventID) error {
			n, err := sqlkit.ExecAffected(ctx, tx, d.dlqTransferDelete(part))
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
	q := d.dlqTransferLock()
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
