package sqlite

import (
	"strconv"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// maxRowsPerInsert is the most rows eventsInsert takes: 4,095, bounded by
// the 32,766 bind parameters of a statement.
func (d *Dialect) maxRowsPerInsert() int { return sqliteMaxBindParams / sqlkit.EventInsertParams }

// eventsInsert is InsertEvents' statement: one multi-row INSERT. Each row
// takes eight parameters; the creation time is bound once (as
// microseconds) and used for next_retry_at, created_at and updated_at.
func (d *Dialect) eventsInsert(rows []dialects.EventRow) dialects.Query {
	args := make([]any, 0, len(rows)*sqlkit.EventInsertParams)
	for _, r := range rows {
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, sqlkit.Nullable(r.Key), r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, us(r.CreatedAt))
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
		for range 3 {
			b = append(b, ",$"...)
			b = strconv.AppendInt(b, int64(base+8), 10)
		}
		b = append(b, ')')
	}
	return string(b)
}
