package mysql

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// mysqlMaxInboxKey is the width of the inbox columns, VARBINARY(255): the
// middleware's MaxKeyLength. INSERT IGNORE would truncate a longer key with
// a warning instead of failing, so InboxRecordMany refuses one.
const mysqlMaxInboxKey = 255

// mysqlInboxChunk is the most ids of one inbox statement.
const mysqlInboxChunk = 5_000

// inboxInsert is InboxRecord's statement: INSERT IGNORE; one affected row
// means the id is new. Locks: a concurrent insert of the same (consumer, event_id) by
// an uncommitted transaction makes this one wait on the primary key until
// that transaction ends; then it inserts (the other rolled back) or ignores
// the row (it committed). The middleware keeps keys and namespaces within
// 255 bytes, the columns' width, so IGNORE never hides a truncation.
func (d *Dialect) inboxInsert(consumer, id string, now time.Time) dialects.Query {
	return dialects.Query{
		SQL:  "INSERT IGNORE INTO " + d.tables.Inbox + " (consumer, event_id, processed_at) VALUES (?, ?, ?)",
		Args: []any{consumer, id, sqlkit.MicroUTC(now)},
	}
}

// inboxSelectPresent is the first statement of InboxRecordMany: the ids
// already recorded. A plain read, not FOR UPDATE: a locking read takes gap
// locks on the absent ids at REPEATABLE READ, and two callers then deadlock
// on their inserts into those gaps (3 to 120 deadlocks in a race of 180
// transactions, against 0 to 5 with the plain read; docs/mysql.md). At
// REPEATABLE READ the plain read may miss ids committed after the caller's
// snapshot; the insert's affected count catches them.
func (d *Dialect) inboxSelectPresent(consumer string, ids []string) dialects.Query {
	args := make([]any, 0, len(ids)+1)
	args = append(args, consumer)
	for _, id := range ids {
		args = append(args, id)
	}
	return dialects.Query{
		SQL:  "SELECT event_id FROM " + d.tables.Inbox + " WHERE consumer = ? AND event_id IN " + inList(len(ids)),
		Args: args,
	}
}

// inboxInsertMany is the second statement of InboxRecordMany: INSERT IGNORE
// of every id in one statement; the affected count is the rows inserted.
func (d *Dialect) inboxInsertMany(consumer string, ids []string, now time.Time) dialects.Query {
	now = sqlkit.MicroUTC(now)
	args := make([]any, 0, 3*len(ids))
	var b strings.Builder
	b.WriteString("INSERT IGNORE INTO " + d.tables.Inbox + " (consumer, event_id, processed_at) VALUES ")
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?)")
		args = append(args, consumer, id, now)
	}
	return dialects.Query{SQL: b.String(), Args: args}
}

const inboxSavepoint = "oncebox_inbox_record"

// InboxRecordMany implements Dialect in the caller's transaction tx, per
// chunk of ids: inboxSelectPresent, then inboxInsertMany of the others under
// a savepoint. When it inserted every one of them, they are the new ids.
// When it inserted fewer, a concurrent transaction inserted some of them
// between the two statements and INSERT IGNORE does not say which: the
// insert is rolled back to the savepoint and the candidates are inserted one
// at a time with inboxInsert, one affected row meaning new.
func (d *Dialect) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	if len(consumer) > mysqlMaxInboxKey {
		return nil, fmt.Errorf("%w: inbox consumer is %d bytes, more than %d", oncebox.ErrInvalidInput, len(consumer), mysqlMaxInboxKey)
	}
	for _, id := range ids {
		if len(id) > mysqlMaxInboxKey {
			return nil, fmt.Errorf("%w: inbox key is %d bytes, more than %d", oncebox.ErrInvalidInput, len(id), mysqlMaxInboxKey)
		}
	}
	var fresh []string
	err := sqlkit.Chunks(ids, mysqlInboxChunk, func(ids []string) error {
		present, err := sqlkit.QueryStrings(ctx, tx, d.inboxSelectPresent(consumer, ids))
		if err != nil {
			return err
		}
		seen := make(map[string]bool, len(present))
		for _, p := range present {
			seen[p] = true
		}
		var candidates []string
		for _, id := range ids {
			if !seen[id] {
				candidates = append(candidates, id)
			}
		}
		if len(candidates) == 0 {
			return nil
		}
		// One order for every transaction: two inserting overlapping ids wait
		// on each other instead of deadlocking.
		sort.Strings(candidates)
		if _, err := tx.ExecContext(ctx, "SAVEPOINT "+inboxSavepoint); err != nil {
			return err
		}
		n, err := sqlkit.ExecAffected(ctx, tx, d.inboxInsertMany(consumer, candidates, now))
		if err != nil {
			return err
		}
		if int(n) == len(candidates) {
			fresh = append(fresh, candidates...)
			_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+inboxSavepoint)
			return err
		}
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+inboxSavepoint); err != nil {
			return err
		}
		for _, id := range candidates {
			n, err := sqlkit.ExecAffected(ctx, tx, d.inboxInsert(consumer, id, now))
			if err != nil {
				return err
			}
			if n == 1 {
				fresh = append(fresh, id)
			}
		}
		_, err = tx.ExecContext(ctx, "RELEASE SAVEPOINT "+inboxSavepoint)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fresh, nil
}

// inboxDeleteBefore is InboxDeleteBefore's statement: up to limit ids
// processed before cutoff. MySQL refuses LIMIT in an IN subquery: DELETE …
// ORDER BY … LIMIT. Index: (processed_at).
func (d *Dialect) inboxDeleteBefore(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.Inbox + " WHERE processed_at < ?\n ORDER BY processed_at\n LIMIT ?",
		Args: []any{sqlkit.MicroUTC(cutoff), limit},
	}
}

// dlqUpsertConsumer is PoisonUpsert's statement: store a poison message,
// or, when the same message failed the same handler before, count one more
// attempt on the existing row. The duplicate is found by the unique index (event_id,
// source, handler_name) or, without an event id, by (message_key, source,
// handler_name), message_key being the message UUID of rows without an event
// id. VALUES(col) is the inserted value (MariaDB has no row alias; MySQL
// 8.0.20+ warns that VALUES() is deprecated but runs it). The affected count
// is 1 for a new row, 2 for a counted attempt.
func (d *Dialect) dlqUpsertConsumer(r dialects.DLQRow) dialects.Query {
	var eventID any
	if r.EventID != nil {
		eventID = d.EncodeID(*r.EventID)
	}
	key := sqlkit.Nullable(r.Key)
	at := sqlkit.MicroUTC(r.FailedAt)
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES (?, ?, 'consumer', ?, ?, ?, ?, ?, ?, ?, 'MOVED', ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    retry_count = retry_count + VALUES(retry_count), last_error = VALUES(last_error),
    last_failed_at = VALUES(last_failed_at), updated_at = VALUES(updated_at)`,
		Args: []any{d.EncodeID(r.ID), eventID, r.HandlerName, r.EventType, r.Topic, key, r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, max(r.Attempts, 1), sqlkit.ErrorText(r.Error), at, at, at, at, at},
	}
}

// dlqConsumerPayload is PoisonPayload's statement. Index: the unique key
// outbox_dlq_events_event_uq (event_id, source, handler_name).
func (d *Dialect) dlqConsumerPayload(eventID oncebox.EventID, handler string) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT payload FROM " + d.tables.DLQ + " WHERE event_id = ? AND source = 'consumer' AND handler_name = ?",
		Args: []any{d.EncodeID(eventID), handler},
	}
}
