package postgres

import (
	"strconv"
	"strings"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// maxRowsPerInsert is the most rows eventsInsert takes: 7,281, bounded by
// the 65,535 bind parameters of a statement.
func (d *Dialect) maxRowsPerInsert() int { return postgresMaxBindParams / sqlkit.EventInsertParams }

// eventsInsert is InsertEvents' statement: one multi-row INSERT. Each row
// takes nine parameters; the creation time is bound once and used for
// created_at and updated_at, the first due time (sqlkit.DueAt: the
// creation time, or a delayed event's time) for next_retry_at.
func (d *Dialect) eventsInsert(rows []dialects.EventRow) dialects.Query {
	args := make([]any, 0, len(rows)*sqlkit.EventInsertParams)
	for _, r := range rows {
		key := sqlkit.Nullable(r.Key)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, key, r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, r.CreatedAt, sqlkit.DueAt(r))
	}
	if len(rows) == 1 && d.insert1 != "" {
		return dialects.Query{SQL: d.insert1, Args: args}
	}
	return dialects.Query{SQL: d.eventsInsertSQL(len(rows)), Args: args}
}

// eventsInsertSQL builds the INSERT text for n rows.
func (d *Dialect) eventsInsertSQL(n int) string {
	b := make([]byte, 0, 160+n*48)
	b = append(b, "INSERT INTO "...)
	b = append(b, d.tables.Events...)
	b = append(b, " ("+sqlkit.EventInsertColumns+") VALUES "...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		base := i * sqlkit.EventInsertParams
		b = append(b, '(')
		for k := 1; k <= 7; k++ {
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(base+k), 10)
			b = append(b, ',')
		}
		b = append(b, "'PENDING',0"...)
		for _, k := range [3]int{9, 8, 8} { // next_retry_at, created_at, updated_at
			b = append(b, ",$"...)
			b = strconv.AppendInt(b, int64(base+k), 10)
		}
		b = append(b, ')')
	}
	return string(b)
}

// notify is Notify's statement: pg_notify takes the channel as text, so it
// needs no quoting. PostgreSQL delivers the notification only if the
// transaction commits and folds identical ones of a transaction into one;
// the commit takes a global lock on the notification queue, which is why
// the publisher limits how often it notifies (docs/design.md, "Wake-up on
// commit").
func (d *Dialect) notify(channel, payload string) dialects.Query {
	return dialects.Query{SQL: "SELECT pg_notify($1, $2)", Args: []any{channel, payload}}
}

// notifyQueueUsage is NotifyQueueUsage's statement: how full the cluster's
// notification queue is, from 0 to 1.
func (d *Dialect) notifyQueueUsage() dialects.Query {
	return dialects.Query{SQL: "SELECT pg_notification_queue_usage()"}
}

// listen is Listen's statement. LISTEN takes the channel as an identifier,
// not a parameter: it is quoted (as pgx.Identifier.Sanitize quotes it, NUL
// bytes dropped and double quotes doubled), so a channel NotifyChannel did
// not name cannot inject anything.
func (d *Dialect) listen(channel string) dialects.Query {
	channel = strings.ReplaceAll(channel, "\x00", "")
	return dialects.Query{SQL: "LISTEN \"" + strings.ReplaceAll(channel, `"`, `""`) + "\""}
}
