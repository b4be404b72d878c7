package oracle

import (
	"strings"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// oracleInsertParams is the number of bind parameters per row of
// eventsInsert: seven, the first due time (next_retry_at), and the
// creation time twice (no placeholder is reused on Oracle).
const oracleInsertParams = sqlkit.EventInsertParams + 1

// oracleMaxInsertAllColumns is Oracle's limit on the target columns of all
// the INTO clauses of one multitable insert together (ORA-24335 beyond).
const oracleMaxInsertAllColumns = 999

// oracleInsertColumns is the number of columns of one eventsInsert row.
const oracleInsertColumns = 12

// maxRowsPerInsert is the most rows eventsInsert takes: 83, bounded by the
// 999 target columns of an INSERT ALL (12 per row) well before the 65,535
// binds (10 per row).
func (d *Dialect) maxRowsPerInsert() int {
	return min(oracleMaxBindParams/oracleInsertParams, oracleMaxInsertAllColumns/oracleInsertColumns)
}

// eventsInsert is InsertEvents' statement: one row is a plain INSERT …
// VALUES; several rows are one INSERT ALL INTO … VALUES (…) … SELECT 1 FROM
// DUAL. An empty payload is stored as NULL (Oracle has no empty BLOB bind)
// and read back as empty.
func (d *Dialect) eventsInsert(rows []dialects.EventRow) dialects.Query {
	var b binder
	var s strings.Builder
	values := func(r dialects.EventRow) string {
		key := sqlkit.Nullable(r.Key)
		return "(" + b.P(d.EncodeID(r.ID)) + ", " + b.P(r.EventType) + ", " + b.P(r.Topic) + ", " +
			b.P(key) + ", " + b.P(r.MessageUUID) + ", " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", " +
			b.P(r.Metadata) + ", 'PENDING', 0, " + b.T(sqlkit.DueAt(r)) + ", " + b.T(r.CreatedAt) + ", " +
			b.T(r.CreatedAt) + ")"
	}
	if len(rows) == 1 {
		s.WriteString("INSERT INTO " + d.tables.Events + " (" + sqlkit.EventInsertColumns + ")\nVALUES " + values(rows[0]))
		return b.Query(s.String())
	}
	s.WriteString("INSERT ALL")
	for _, r := range rows {
		s.WriteString("\n  INTO " + d.tables.Events + " (" + sqlkit.EventInsertColumns + ")\n    VALUES " + values(r))
	}
	s.WriteString("\nSELECT 1 FROM DUAL")
	return b.Query(s.String())
}
