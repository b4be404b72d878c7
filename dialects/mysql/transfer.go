package mysql

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

// dlqDeleteResolved is Relay.DeleteResolvedDLQ's statement: up to limit
// RESOLVED rows last updated before cutoff. moved_at is never after
// updated_at, so the redundant moved_at bound lets the index (status,
// moved_at, id) range over the old RESOLVED rows only. MySQL has no SKIP
// LOCKED on DELETE: a row an operator is changing right now is waited for (it
// runs in relayTx, at READ COMMITTED, where only rows still matching are
// waited for).
func (d *Dialect) dlqDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	cutoff = sqlkit.MicroUTC(cutoff)
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.DLQ + ` WHERE status = 'RESOLVED' AND moved_at < ? AND updated_at < ?
 ORDER BY moved_at, id
 LIMIT ?`,
		Args: []any{cutoff, cutoff, limit},
	}
}

// dlqTransferSelect is the first statement of TransferDLQToOutbox: lock up
// to limit TO_RETRY rows, oldest first, skipping rows a concurrent transfer
// holds. Index: (status, moved_at, id).
func (d *Dialect) dlqTransferSelect(limit int) dialects.Query {
	return dialects.Query{
		SQL: "SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at\n  FROM " +
			d.tables.DLQ + `
 WHERE status = 'TO_RETRY'
 ORDER BY moved_at, id
 LIMIT ?
   FOR UPDATE SKIP LOCKED`,
		Args: []any{limit},
	}
}

// dlqTransferInsert is the second statement of TransferDLQToOutbox: the
// events, PENDING, retry_count 0, due now; an event id already in the
// outbox is re-armed exactly as on PostgreSQL (content from the DLQ row,
// PENDING, retry_count 0, due now, claim and failure cleared, created_at
// kept). Each row's event id and metadata are computed by the caller.
func (d *Dialect) dlqTransferInsert(rows []dialects.EventRow, now time.Time) dialects.Query {
	now = sqlkit.MicroUTC(now)
	args := make([]any, 0, len(rows)*10)
	var b strings.Builder
	b.WriteString("INSERT INTO " + d.tables.Events + ` (id, event_type, topic, partition_key, message_uuid, payload,
    metadata, status, retry_count, next_retry_at, created_at, updated_at) VALUES `)
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,'PENDING',0,?,?,?)")
		key := sqlkit.Nullable(r.Key)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, key, r.MessageUUID, sqlkit.NonNilBytes(r.Payload),
			r.Metadata, now, sqlkit.MicroUTC(r.CreatedAt), now)
	}
	b.WriteString(`
ON DUPLICATE KEY UPDATE
    event_type = VALUES(event_type), topic = VALUES(topic), partition_key = VALUES(partition_key),
    message_uuid = VALUES(message_uuid), payload = VALUES(payload), metadata = VALUES(metadata),
    status = 'PENDING', retry_count = 0, next_retry_at = VALUES(next_retry_at),
    claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
    updated_at = VALUES(updated_at)`)
	return dialects.Query{SQL: b.String(), Args: args}
}

// dlqDeleteID is the last statement of TransferDLQToOutbox, once per
// transferred row: remove it from the DLQ by primary key (one row per
// statement: see eventsDelete).
func (d *Dialect) dlqDeleteID(id oncebox.EventID) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.DLQ + " WHERE id = ?", Args: []any{d.EncodeID(id)}}
}

// dlqToRetryProbe tells, without locking, whether a TO_RETRY row waits: an
// idle TransferDLQToOutbox run stops there. Index: (status, moved_at, id).
func (d *Dialect) dlqToRetryProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.DLQ + " WHERE status = 'TO_RETRY' LIMIT 1"}
}

// TransferDLQToOutbox implements dialects.Relay: dlqToRetryProbe, then
// dlqTransferSelect, dlqTransferInsert and dlqDeleteID per row in one READ
// COMMITTED transaction, so a crash leaves each row on one side and
// concurrent transfers take disjoint rows. What PostgreSQL's statement
// computes is computed here: the event id is the row's event_id or, for a
// consumed message that had none, the DLQ row's own id; the metadata loses
// oncebox_event_id and oncebox_event_type, which the relay sends from the
// outbox row's columns; rows sharing an event id become
// one event, the latest moved row winning.
func (d *Dialect) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if found, err := sqlkit.Exists(ctx, db, d.dlqToRetryProbe()); err != nil || !found {
		return 0, err
	}
	moved := 0
	err := relayTx.Run(ctx, db, func(tx wsql.Tx) error {
		moved = 0
		picked, err := d.queryTransfer(ctx, tx, limit)
		if err != nil || len(picked) == 0 {
			return err
		}
		events, err := sqlkit.TransferEvents(picked)
		if err != nil {
			return err
		}
		if err := sqlkit.Chunks(events, mysqlMaxBindParams/10, func(rows []dialects.EventRow) error {
			_, err := sqlkit.ExecAffected(ctx, tx, d.dlqTransferInsert(rows, now))
			return err
		}); err != nil {
			return err
		}
		ids := make([]oncebox.EventID, len(picked))
		for i := range picked {
			ids[i] = picked[i].ID
		}
		moved, err = deleteEach(ctx, tx, ids, d.dlqDeleteID)
		return err
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

func (d *Dialect) queryTransfer(ctx context.Context, tx wsql.Tx, limit int) ([]sqlkit.TransferRow, error) {
	q := d.dlqTransferSelect(limit)
	rows, err := tx.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlkit.TransferRow
	for rows.Next() {
		var r sqlkit.TransferRow
		if err := rows.Scan(&r.ID, &r.EventID, &r.EventType, &r.Topic, &r.Key, &r.MessageUUID, &r.Payload,
			&r.Metadata, &r.CreatedAt, &r.MovedAt); err != nil {
			return nil, sqlkit.ScanHint(fmt.Errorf("scan: %w", err))
		}
		out = append(out, r)
	}
	return out, sqlkit.RowsErr(rows)
}
