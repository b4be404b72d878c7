package mysql

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// inspector returns the runner of the inspector's statements.
func (d *Dialect) inspector() sqlkit.Inspector {
	return sqlkit.Inspector{S: sqlkit.InspectorStatements{Backlog: d.backlog, EventsList: d.eventsList}}
}

// backlog counts the outbox and DLQ rows by group: the shared UNION ALL,
// with a NULL of DATETIME(6) for the DLQ's oldest.
func (d *Dialect) backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "CAST(NULL AS DATETIME(6))")}
}

// eventsList selects every row of the outbox table in id order.
func (d *Dialect) eventsList() dialects.Query { return sqlkit.EventsList(d.tables) }
