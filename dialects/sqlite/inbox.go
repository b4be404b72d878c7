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

// inboxInsert is InboxRecord's statement: record one processed id unless
// present. One affected row means the id is new. Locks: the write lock of
// the caller's transaction: a second transaction recording the same id
// waits for the first to end, then inserts it (the first rolled back) or
// does nothing (it committed).
func (d *Dialect) inboxInsert(consumer, id string, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Inbox + ` (consumer, event_id, processed_at) VALUES (?1, ?2, ?3)
ON CONFLICT DO NOTHING`,
		Args: []any{consumer, id, us(now)},
	}
}

// maxInboxIDs is the most ids one inboxInsertMany binds (three
// parameters each: 30,000).
const maxInboxIDs = maxIDsPerStatement

// inboxInsertMany is InboxRecordMany's statement: record ids in one
// statement and return, one per row, those that were new (RETURNING
// gives the inserted rows only; an id twice in ids is inserted once).
func (d *Dialect) inboxInsertMany(consumer string, ids []string, now time.Time) dialects.Query {
	var b binder
	var s strings.Builder
	s.WriteString("INSERT INTO " + d.tables.Inbox + " (consumer, event_id, processed_at) VALUES ")
	for i, id := range ids {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString("(" + b.P(consumer) + ", " + b.P(id) + ", " + b.T(now) + ")")
	}
	s.WriteString("\nON CONFLICT DO NOTHING\nRETURNING event_id")
	return b.Query(s.String())
}

// InboxRecordMany implements Dialect in the caller's transaction:
// inboxInsertMany per maxInboxIDs ids.
func (d *Dialect) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	var out []string
	err := sqlkit.Chunks(ids, maxInboxIDs, func(part []string) error {
		got, err := sqlkit.QueryStrings(ctx, tx, d.inboxInsertMany(consumer, part, now))
		out = append(out, got...)
		return err
	})
	return out, err
}

// inboxDeleteBefore is InboxDeleteBefore's statement: up to limit ids
// processed before cutoff. Index: (processed_at).
func (d *Dialect) inboxDeleteBefore(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.Inbox + ` WHERE rowid IN (
    SELECT rowid FROM ` + d.tables.Inbox + ` WHERE processed_at < ?1 LIMIT ?2)`,
		Args: []any{us(cutoff), limit},
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
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.DLQ + ` AS q (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES (?1, ?2, 'consumer', ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'MOVED', ?12, ?10, ?11, ?11, ?11, ?11, ?11)
ON CONFLICT ` + conflict + ` DO UPDATE
   SET retry_count = q.retry_count + excluded.retry_count, last_error = excluded.last_error,
       last_failed_at = excluded.last_failed_at, updated_at = excluded.updated_at`,
		Args: []any{d.EncodeID(r.ID), eventID, r.HandlerName, r.EventType, r.Topic, sqlkit.Nullable(r.Key), r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, sqlkit.ErrorText(r.Error), us(r.FailedAt), max(r.Attempts, 1)},
	}
}

// dlqConsumerPayload is PoisonPayload's statement. Index: the unique index
// on (event_id, source, handler_name).
func (d *Dialect) dlqConsumerPayload(eventID oncebox.EventID, handler string) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT payload FROM " + d.tables.DLQ + " WHERE event_id = ?1 AND source = 'consumer' AND handler_name = ?2",
		Args: []any{d.EncodeID(eventID), handler},
	}
}
