package mysql

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// Backlog implements Dialect.
func (d *Dialect) Backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "CAST(NULL AS DATETIME(6))")}
}

// EventsList implements Dialect.
func (d *Dialect) EventsList() dialects.Query { return sqlkit.EventsList(d.tables) }
