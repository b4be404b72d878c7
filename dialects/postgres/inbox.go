package postgres

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// inboxInsert is InboxRecord's statement: record one processed id unless
// present. One affected row means the id is new. Locks: a concurrent insert of the
// same (consumer, event_id) by an uncommitted transaction makes this one wait
// on the unique index until that transaction ends; then it inserts (the other
// rolled back) or does nothing (it committed).
func (d *Dialect) inboxInsert(consumer, id string, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Inbox + ` (consumer, event_id, processed_at) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING`,
		Args: []any{consumer, id, now},
	}
}

// inboxInsertMany is InboxRecordMany's statement: record ids in one
// statement and return, one per row, those that were new.
func (d *Dialect) inboxInsertMany(consumer string, ids []string, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Inbox + ` (consumer, event_id, processed_at)
SELECT $1, id, $3 FROM unnest($2::text[]) AS t(id)
ON CONFLICT DO NOTHING
RETURNING event_id`,
		Args: []any{consumer, ids, now},
	}
}

// inboxDeleteBefore is InboxDeleteBefore's statement: up to limit ids
// processed before cutoff. Index: (processed_at).
func (d *Dialect) inboxDeleteBefore(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.Inbox + ` WHERE (consumer, event_id) IN (
    SELECT consumer, event_id FROM ` + d.tables.Inbox + ` WHERE processed_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		Args: []any{cutoff, limit},
	}
}

// dlqUpsertConsumer is PoisonUpsert's statement: store a poison message,
// or, when the same message failed the same handler before (a crash between
// storing and acking, or a redelivery), count one more attempt on the
// existing row.
func (d *Dialect) dlqUpsertConsumer(r dialects.DLQRow) dialects.Query {
	var eventID any
	conflict := "(event_id, source, handler_name)"
	if r.EventID != nil {
		eventID = d.EncodeID(*r.EventID)
	} else {
		conflict = "(message_uuid, source, handler_name) WHERE event_id IS NULL"
	}
	key := sqlkit.Nullable(r.Key)
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.DLQ + ` AS q (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES ($1, $2, 'consumer', $3, $4, $5, $6, $7, $8, $9, 'MOVED', $12, $10, $11, $11, $11, $11, $11)
ON CONFLICT ` + conflict + ` DO UPDATE
   SET retry_count = q.retry_count + EXCLUDED.retry_count, last_error = EXCLUDED.last_error,
       last_failed_at = EXCLUDED.last_failed_at, updated_at = EXCLUDED.updated_at`,
		Args: []any{d.EncodeID(r.ID), eventID, r.HandlerName, r.EventType, r.Topic, key, r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, sqlkit.ErrorText(r.Error), r.FailedAt, max(r.Attempts, 1)},
	}
}

// dlqConsumerPayload is PoisonPayload's statement. Index: the unique index
// on (event_id, source, handler_name).
func (d *Dialect) dlqConsumerPayload(eventID oncebox.EventID, handler string) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT payload FROM " + d.tables.DLQ + " WHERE event_id = $1 AND source = 'consumer' AND handler_name = $2",
		Args: []any{d.EncodeID(eventID), handler},
	}
}

// InboxRecordMany implements Dialect with the one statement of
// inboxInsertMany: ON CONFLICT DO NOTHING RETURNING gives the new ids, and a
// concurrent insert of the same id makes the statement wait for the other
// transaction, then skip the id if it committed.
func (d *Dialect) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	return sqlkit.QueryStrings(ctx, tx, d.inboxInsertMany(consumer, ids, now))
}
