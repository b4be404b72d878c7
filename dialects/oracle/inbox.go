package oracle

import (
	"context"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// inboxInsert is InboxRecord's statement: a MERGE that inserts (consumer,
// id) when not present; one affected row means new. consumer "" (the default
// namespace) and id "" are stored as ' ' (Oracle's "" is NULL). A concurrent
// uncommitted insert of the same key makes the MERGE wait; if that
// transaction commits, the MERGE fails with ORA-00001 instead of affecting
// nothing (InboxRecordMany turns that into "not new"; InboxRecord returns
// the error, and the message is redelivered and then found).
func (d *Dialect) inboxInsert(consumer, id string, now time.Time) dialects.Query {
	var b binder
	return b.Query("MERGE INTO " + d.tables.Inbox + " i\nUSING (SELECT " + b.P(oraText(consumer)) + " AS consumer, " +
		b.P(oraText(id)) + " AS event_id, " + b.T(now) + ` AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)`)
}

// inboxDeleteBefore is InboxDeleteBefore's statement: up to limit ids
// processed before cutoff, through a ROWNUM-bounded ROWID subquery (inbox rows are never
// updated; one leased instance runs the clean-up). Index: (processed_at).
func (d *Dialect) inboxDeleteBefore(cutoff time.Time, limit int) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.Inbox + " WHERE ROWID IN (SELECT ROWID FROM " + d.tables.Inbox +
		"\n WHERE processed_at < " + b.T(cutoff) + " AND ROWNUM <= " + b.P(limit) + ")")
}

// dlqUpsertConsumer is PoisonUpsert's statement: a MERGE on the key the
// unique indexes enforce, (event_id, source, handler_name), or (message_uuid,
// source, handler_name) for a message without an event id; a row already
// there counts one more attempt. handler_name "" is stored as ' '. Two
// concurrent MERGEs of a new key: one fails with ORA-00001 (PostgreSQL's ON
// CONFLICT would update instead); the message is redelivered and counted
// then.
func (d *Dialect) dlqUpsertConsumer(r dialects.DLQRow) dialects.Query {
	var b binder
	key := sqlkit.Nullable(r.Key)
	var eventID any
	// The ON conditions spell the expressions of the function-based unique
	// indexes, so that the MERGE finds the row through them.
	on := "CASE WHEN q.event_id IS NOT NULL THEN q.event_id END = s.event_id" +
		"\n       AND CASE WHEN q.event_id IS NOT NULL THEN q.source END = 'consumer'" +
		"\n       AND CASE WHEN q.event_id IS NOT NULL THEN q.handler_name END = s.handler_name"
	if r.EventID != nil {
		eventID = d.EncodeID(*r.EventID)
	} else {
		on = "CASE WHEN q.event_id IS NULL THEN q.message_uuid END = s.message_uuid" +
			"\n       AND CASE WHEN q.event_id IS NULL THEN q.source END = 'consumer'" +
			"\n       AND CASE WHEN q.event_id IS NULL THEN q.handler_name END = s.handler_name"
	}
	using := "SELECT " + b.P(d.EncodeID(r.ID)) + " AS id, " + b.P(eventID) + " AS event_id, " +
		b.P(oraText(r.HandlerName)) + " AS handler_name, " + b.P(r.MessageUUID) + " AS message_uuid, " +
		b.T(r.FailedAt) + " AS failed_at FROM DUAL"
	var s strings.Builder
	s.WriteString("MERGE INTO " + d.tables.DLQ + " q\nUSING (" + using + ") s\n   ON (" + on + ")")
	s.WriteString("\n WHEN MATCHED THEN UPDATE SET q.retry_count = q.retry_count + " + b.P(max(r.Attempts, 1)) + ", q.last_error = " + b.P(sqlkit.ErrorText(r.Error)) +
		",\n      q.last_failed_at = s.failed_at, q.updated_at = s.failed_at")
	s.WriteString(`
 WHEN NOT MATCHED THEN INSERT (id, event_id, source, handler_name, event_type, topic, partition_key,
      message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
      last_failed_at, moved_at, updated_at)
      VALUES (s.id, s.event_id, 'consumer', s.handler_name, ` + b.P(r.EventType) + ", " + b.P(r.Topic) + ", " + b.P(key) +
		",\n      s.message_uuid, " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", " + b.P(r.Metadata) + ", 'MOVED', " + b.P(max(r.Attempts, 1)) + ", " + b.P(sqlkit.ErrorText(r.Error)) +
		",\n      s.failed_at, s.failed_at, s.failed_at, s.failed_at, s.failed_at)")
	return b.Query(s.String())
}

// dlqConsumerPayload is PoisonPayload's statement. The conditions spell the
// expressions of the function-based unique index on (event_id, source,
// handler_name), so that the lookup goes through it; ” is stored as ' '.
func (d *Dialect) dlqConsumerPayload(eventID oncebox.EventID, handler string) dialects.Query {
	var b binder
	return b.Query("SELECT payload FROM " + d.tables.DLQ +
		"\n WHERE CASE WHEN event_id IS NOT NULL THEN event_id END = " + b.P(d.EncodeID(eventID)) +
		"\n   AND CASE WHEN event_id IS NOT NULL THEN source END = 'consumer'" +
		"\n   AND CASE WHEN event_id IS NOT NULL THEN handler_name END = " + b.P(oraText(handler)))
}

// InboxRecordMany implements Dialect: one inboxInsert MERGE per id in the
// caller's transaction (one round trip per id), whose affected count tells
// new (1) or present (0). An id a concurrent transaction inserted and
// committed first makes the MERGE wait, then fail with ORA-00001: not new.
// Oracle rolls back only the failed statement, so the transaction goes on.
func (d *Dialect) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	var out []string
	for _, id := range ids {
		n, err := sqlkit.ExecAffected(ctx, tx, d.inboxInsert(consumer, id, now))
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
