package mysql

import (
	"strings"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// maxRowsPerInsert is the most rows eventsInsert takes: 7,281, bounded by
// the 65,535 placeholders of a prepared statement.
func (d *Dialect) maxRowsPerInsert() int { return mysqlMaxBindParams / sqlkit.EventInsertParams }

// eventsInsert is InsertEvents' statement: one multi-row INSERT of nine
// parameters per row, the last the first due time (sqlkit.DueAt: the
// creation time, or a delayed event's time) for next_retry_at. MySQL
// placeholders cannot be reused, so the creation time is written into
// updated_at by referring to the created_at value of the same row.
func (d *Dialect) eventsInsert(rows []dialects.EventRow) dialects.Query {
	args := make([]any, 0, len(rows)*sqlkit.EventInsertParams)
	for _, r := range rows {
		key := sqlkit.Nullable(r.Key)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, key, r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, sqlkit.MicroUTC(r.CreatedAt), sqlkit.MicroUTC(sqlkit.DueAt(r)))
	}
	var b strings.Builder
	b.Grow(200 + len(rows)*44)
	b.WriteString("INSERT INTO " + d.tables.Events +
		" (id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at," +
		" status, retry_count, next_retry_at, updated_at) VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,'PENDING',0,?,created_at)")
	}
	return dialects.Query{SQL: b.String(), Args: args}
}
