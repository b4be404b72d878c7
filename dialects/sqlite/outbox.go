package sqlite

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// insertParams is the bind parameters of one row of eventsInsert: the
// nine of sqlkit.EventInsertParams, the creation time bound twice (an
// anonymous ? is bound once each).
const insertParams = sqlkit.EventInsertParams + 1

// maxRowsPerInsert is the most rows eventsInsert takes: 3,276, bounded by
// the 32,766 bind parameters of a statement.
func (d *Dialect) maxRowsPerInsert() int { return sqliteMaxBindParams / insertParams }

// eventsInsert is InsertEvents' statement: one multi-row INSERT. Each row
// takes ten parameters: the first due time (sqlkit.DueAt: the creation
// time, or a delayed event's time) is next_retry_at, the creation time
// created_at and updated_at, all as microseconds.
func (d *Dialect) eventsInsert(rows []dialects.EventRow) dialects.Query {
	args := make([]any, 0, len(rows)*insertParams)
	for _, r := range rows {
		at := us(r.CreatedAt)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, sqlkit.Nullable(r.Key), r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, us(sqlkit.DueAt(r)), at, at)
	}
	if len(rows) == 1 && d.insert1 != "" {
		return dialects.Query{SQL: d.insert1, Args: args}
	}
	return dialects.Query{SQL: d.eventsInsertSQL(len(rows)), Args: args}
}

// eventsInsertSQL builds the INSERT text for n rows.
func (d *Dialect) eventsInsertSQL(n int) string {
	const row = "(?,?,?,?,?,?,?,'PENDING',0,?,?,?)"
	b := make([]byte, 0, 160+n*(len(row)+1))
	b = append(b, "INSERT INTO "...)
	b = append(b, d.tables.Events...)
	b = append(b, " ("+sqlkit.EventInsertColumns+") VALUES "...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, row...)
	}
	return string(b)
}
