package postgres

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// EventsList implements Dialect.
func (d *Dialect) EventsList() dialects.Query { return sqlkit.EventsList(d.tables) }

// Backlog implements Dialect.
func (d *Dialect) Backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "NULL::timestamptz")}
}
