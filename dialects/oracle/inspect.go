package oracle

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// Backlog implements Dialect: the shared UNION ALL of two GROUP BYs, each
// with its FROM; a NULL of TIMESTAMP(6) for the DLQ's oldest.
func (d *Dialect) Backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "CAST(NULL AS TIMESTAMP(6))")}
}

// EventsList implements Dialect.
func (d *Dialect) EventsList() dialects.Query { return sqlkit.EventsList(d.tables) }
