package sqlite

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// inspector returns the runner of the inspector's statements.
func (d *Dialect) inspector() sqlkit.Inspector {
	return sqlkit.Inspector{S: sqlkit.InspectorStatements{Backlog: d.backlog, EventsList: d.eventsList}}
}

// eventsList selects every row of the outbox table in id order.
func (d *Dialect) eventsList() dialects.Query { return sqlkit.EventsList(d.tables) }

// backlog counts the outbox and DLQ rows by group. The earliest
// next_retry_at of a group is read as a column, not as min(): SQLite gives a bare
// column of an aggregate query the value of the row min() picked, and a
// column keeps its declared type (TIMESTAMP), by which the driver reads
// the INTEGER back as a time; min() itself would come back an integer.
func (d *Dialect) backlog() dialects.Query {
	return dialects.Query{SQL: `SELECT 'outbox', g.event_type, g.status, g.n, g.next_retry_at FROM (
    SELECT event_type, status, count(*) AS n, min(next_retry_at) AS m, next_retry_at FROM ` + d.tables.Events + `
     GROUP BY event_type, status) g
UNION ALL
SELECT 'dlq', source, status, count(*), NULL FROM ` + d.tables.DLQ + ` GROUP BY source, status`}
}
