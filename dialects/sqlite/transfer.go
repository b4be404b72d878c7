package sqlite

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
// RESOLVED rows last updated (resolved) before cutoff. moved_at is never
// after updated_at, so the redundant moved_at bound lets the index
// (status, moved_at, id) range over the old RESOLVED rows only.
func (d *Dialect) dlqDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.DLQ + ` WHERE id IN (SELECT id FROM ` + d.tables.DLQ + `
 WHERE status = 'RESOLVED' AND moved_at < ?1 AND updated_at < ?1 ORDER BY moved_at, id LIMIT ?2)`,
		Args: []any{us(cutoff), limit},
	}
}

// dlqToRetryProbe tells, with a plain read, whether a TO_RETRY row waits:
// an idle TransferDLQToOutbox stops there. Index: (status, moved_at, id).
func (d *Dialect) dlqToRetryProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.DLQ + " WHERE status = 'TO_RETRY' LIMIT 1"}
}

// dlqTransferSelect is the first statement of TransferDLQToOutbox, in its
// write transaction: up to limit TO_RETRY rows, oldest first. Index:
// (status, moved_at, id).
func (d *Dialect) dlqTransferSelect(limit int) dialects.Query {
	return dialects.Query{
		SQL: "SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at\n  FROM " +
			d.tables.DLQ + `
 WHERE status = 'TO_RETRY'
 ORDER BY moved_at, id
 LIMIT ?1`,
		Args: []any{limit},
	}
}

// dlqTransferInsert is the second statement of TransferDLQToOutbox: the
// events, PENDING, retry_count 0, due now; an event id already in the
// outbox (a service whose consumer and producer share one file: the event
// is there, PROCESSED) is re-armed as on PostgreSQL (content from the DLQ
// row, PENDING, retry_count 0, due now, claim and failure cleared,
// created_at kept). Each row's event id and metadata are computed by the
// caller (sqlkit.TransferEvents). Ten parameters a row.
func (d *Dialect) dlqTransferInsert(rows []dialects.EventRow, now time.Time) dialects.Query {
	var b binder
	var s strings.Builder
	s.WriteString("INSERT INTO " + d.tables.Events + ` (id, event_type, topic, partition_key, message_uuid, payload,
    metadata, status, retry_count, next_retry_at, created_at, updated_at) VALUES `)
	for i, r := range rows {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString("(" + b.P(d.EncodeID(r.ID)) + "," + b.P(r.EventType) + "," + b.P(r.Topic) + "," +
			b.P(sqlkit.Nullable(r.Key)) + "," + b.P(r.MessageUUID) + "," + b.P(sqlkit.NonNilBytes(r.Payload)) + "," +
			b.P(r.Metadata) + ",'PENDING',0," + b.T(now) + "," + b.T(r.CreatedAt) + "," + b.T(now) + ")")
	}
	s.WriteString(`
ON CONFLICT (id) DO UPDATE
   SET event_type = excluded.event_type, topic = excluded.topic, partition_key = excluded.partition_key,
       message_uuid = excluded.message_uuid, payload = excluded.payload, metadata = excluded.metadata,
       status = 'PENDING', retry_count = 0, next_retry_at = excluded.next_retry_at,
       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
       updated_at = excluded.updated_at`)
	return b.Query(s.String())
}

// dlqDeleteIDs is the last statement of TransferDLQToOutbox: remove the
// transferred rows from the DLQ by primary key.
func (d *Dialect) dlqDeleteIDs(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE " + b.In("id", d.ids(ids)))
}

// TransferDLQToOutbox implements dialects.Relay: dlqToRetryProbe, then
// dlqTransferSelect, dlqTransferInsert and dlqDeleteIDs in one write
// transaction, so a crash leaves each row on one side, and two transfers
// (on two processes) run one after the other, the second finding the
// rows gone. What PostgreSQL's statement computes is computed in Go
// (sqlkit.TransferEvents): the event id is the row's event_id or, for a
// consumed message that had none, the DLQ row's own id; the metadata loses
// oncebox_event_id and oncebox_event_type, which the relay sends from the
// outbox row's columns; rows sharing an event id become
// one event, the latest moved row winning.
func (d *Dialect) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	if found, err := sqlkit.Exists(ctx, db, d.dlqToRetryProbe()); err != nil || !found {
		return 0, err
	}
	moved := 0
	err := sqlkit.Tx{}.Run(ctx, db, func(tx wsql.Tx) error {
		moved = 0
		picked, err := d.queryTransfer(ctx, tx, limit)
		if err != nil || len(picked) == 0 {
			return err
		}
		events, err := sqlkit.TransferEvents(picked)
		if err != nil {
			return err
		}
		if err := sqlkit.Chunks(events, sqliteMaxBindParams/10, func(rows []dialects.EventRow) error {
			_, err := sqlkit.ExecAffected(ctx, tx, d.dlqTransferInsert(rows, now))
			return err
		}); err != nil {
			return err
		}
		ids := make([]oncebox.EventID, len(picked))
		for i := range picked {
			ids[i] = picked[i].ID
		}
		return sqlkit.Chunks(ids, maxIDsPerStatement, func(part []oncebox.EventID) error {
			n, err := sqlkit.ExecAffected(ctx, tx, d.dlqDeleteIDs(part))
			moved += int(n)
			return err
		})
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
			&r.Metadata, microTime{&r.CreatedAt}, microTime{&r.MovedAt}); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, r)
	}
	return out, sqlkit.RowsErr(rows)
}
