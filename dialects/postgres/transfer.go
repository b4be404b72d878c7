package postgres

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// dlqTransferToOutbox is TransferDLQToOutbox's statement: up to limit
// TO_RETRY rows go back to the outbox as PENDING events due now, with
// retry_count 0, and leave the DLQ, in one statement and so in one
// transaction: a crash leaves each row on one side. The DLQ status IN_PROCESS
// is not used.
//
// The event id is the row's event_id, or, for a consumed message that had
// none, the DLQ row's own id (a UUIDv7 as well). The metadata loses
// any oncebox_event_id and oncebox_event_type (a consumed message's): the
// outbox row holds them in its columns and the relay sends them, so the
// consumers' inboxes see the same id as before. A publisher row
// goes to its event_type and topic; a consumer row to the topic it was
// consumed from, under its event_type. Rows of one batch that share an event
// id (the same event parked by two handlers) become one outbox event: the
// latest moved row's content wins.
//
// When the event id is already in the outbox (a service whose consumer and
// producer share one schema: the event is there, PROCESSED), that row is
// re-armed: PENDING, retry_count 0, due now, claim cleared, content from the
// DLQ row. The affected count is the DLQ rows moved.
//
// Locks: FOR UPDATE SKIP LOCKED on the DLQ rows, so concurrent transfers on
// several instances take disjoint rows and never move one twice, and an
// operator's status change waits for (or is skipped by) the transfer, never
// overwritten. The re-arm takes the outbox row's lock. Index: (status,
// moved_at, id) gives the TO_RETRY rows in order.
func (d *Dialect) dlqTransferToOutbox(now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH picked AS MATERIALIZED (
    SELECT id, COALESCE(event_id, id) AS event_id, event_type, topic, partition_key, message_uuid,
           payload, metadata, created_at, moved_at
      FROM ` + d.tables.DLQ + `
     WHERE status = 'TO_RETRY'
     ORDER BY moved_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
armed AS (
    INSERT INTO ` + d.tables.Events + ` AS e (id, event_type, topic, partition_key, message_uuid, payload,
        metadata, status, retry_count, next_retry_at, created_at, updated_at)
    SELECT DISTINCT ON (event_id) event_id, event_type, topic, partition_key, message_uuid, payload,
           metadata - 'oncebox_event_id' - 'oncebox_event_type',
           'PENDING', 0, $1, created_at, $1
      FROM picked
     ORDER BY event_id, moved_at DESC, id DESC
    ON CONFLICT (id) DO UPDATE
       SET event_type = EXCLUDED.event_type, topic = EXCLUDED.topic, partition_key = EXCLUDED.partition_key,
           message_uuid = EXCLUDED.message_uuid, payload = EXCLUDED.payload, metadata = EXCLUDED.metadata,
           status = 'PENDING', retry_count = 0, next_retry_at = EXCLUDED.next_retry_at,
           claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
           updated_at = EXCLUDED.updated_at
)
DELETE FROM ` + d.tables.DLQ + ` q
 USING picked
 WHERE q.id = picked.id`,
		Args: []any{now, limit},
	}
}

// dlqDeleteResolved is Relay.DeleteResolvedDLQ's statement: up to limit
// RESOLVED rows last updated (resolved) before cutoff. moved_at is never
// after updated_at, so the redundant moved_at bound lets the index (status,
// moved_at, id) range over the old RESOLVED rows only. Locks: SKIP LOCKED
// passes over rows an operator is changing right now.
func (d *Dialect) dlqDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.DLQ + ` WHERE id IN (SELECT id FROM ` + d.tables.DLQ + `
 WHERE status = 'RESOLVED' AND moved_at < $1 AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		Args: []any{cutoff, limit},
	}
}

// TransferDLQToOutbox implements dialects.Relay with the one statement of
// dlqTransferToOutbox.
func (d *Dialect) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.dlqTransferToOutbox(now, limit))
	return int(n), err
}
