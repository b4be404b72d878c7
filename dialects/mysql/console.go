package mysql

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

var _ dialects.ConsoleInspector = (*Dialect)(nil)

// console returns the runner of the console's statements. The error
// class is computed in Go (dialects.ErrorClass): MariaDB's and MySQL's
// regular expressions differ from each other and from PostgreSQL's, and
// the table has no stored class, so a fingerprint view reads the rows its
// filter keeps.
func (d *Dialect) console() sqlkit.Console {
	return sqlkit.Console{S: sqlkit.ConsoleStatements{
		Types: func(now, since time.Time) dialects.Query {
			return dialects.Query{SQL: sqlkit.ConsoleTypesSQL(d.tables, "?", "?"), Args: []any{sqlkit.MicroUTC(now), sqlkit.MicroUTC(since)}}
		},
		Heartbeats:  sqlkit.ConsoleHeartbeats(d.tables),
		Claims:      sqlkit.ConsoleClaims(d.tables),
		Errors:      d.consoleErrors,
		GroupErrors: d.consoleGroupErrors,
		OutboxEvent: func(id oncebox.EventID) dialects.Query {
			return dialects.Query{SQL: sqlkit.ConsoleOutboxEventSQL(d.tables, "?"), Args: []any{d.EncodeID(id)}}
		},
	}}
}

// consoleGroupErrors builds a page of a fingerprint's act: the rows of
// source and eventType in statuses after an id, in id order. Index: the
// primary key, filtered.
func (d *Dialect) consoleGroupErrors(source oncebox.DLQSource, eventType string, statuses []oncebox.DLQStatus, after *oncebox.EventID, limit int) dialects.Query {
	conds, args := mysqlDLQWhere(dialects.DLQFilter{Source: source, EventType: eventType, Statuses: statuses}, nil, nil)
	if after != nil {
		conds = append(conds, "id > ?")
		args = append(args, d.EncodeID(*after))
	}
	return dialects.Query{SQL: sqlkit.ConsoleGroupErrorsSQL(d.tables, conds, "?"), Args: append(args, limit)}
}

// consoleErrors builds a keyset page of the fingerprint view: the rows
// matching f after an id, in id order. Index: the primary key, filtered
// (or dlqWhere's indexes when f is narrow).
func (d *Dialect) consoleErrors(f dialects.DLQFilter, after *oncebox.EventID, limit int) dialects.Query {
	conds, args := mysqlDLQWhere(f, nil, nil)
	if after != nil {
		conds = append(conds, "id > ?")
		args = append(args, d.EncodeID(*after))
	}
	return dialects.Query{SQL: sqlkit.ConsoleErrorsSQL(d.tables, conds, "?"), Args: append(args, limit)}
}
