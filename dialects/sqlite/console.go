package sqlite

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

var _ dialects.ConsoleInspector = (*Dialect)(nil)

// console returns the runner of the console's statements. The error
// class is computed in Go (dialects.ErrorClass): SQLite has no regular
// expressions of its own, and the table has no stored class, so a
// fingerprint view reads the rows its filter keeps. The oldest due time
// comes back an INTEGER of unix microseconds (an aggregate loses the
// declared type); sqlkit.Console reads either.
func (d *Dialect) console() sqlkit.Console {
	return sqlkit.Console{S: sqlkit.ConsoleStatements{
		Types: func(now, since time.Time) dialects.Query {
			return dialects.Query{SQL: sqlkit.ConsoleTypesSQL(d.tables, "?1", "?2"), Args: []any{us(now), us(since)}}
		},
		Heartbeats:  sqlkit.ConsoleHeartbeats(d.tables),
		Claims:      sqlkit.ConsoleClaims(d.tables),
		Errors:      d.consoleErrors,
		GroupErrors: d.consoleGroupErrors,
		OutboxEvent: func(id oncebox.EventID) dialects.Query {
			return dialects.Query{SQL: sqlkit.ConsoleOutboxEventSQL(d.tables, "?1"), Args: []any{d.EncodeID(id)}}
		},
	}}
}

// consoleGroupErrors builds a page of a fingerprint's act: the rows of
// source and eventType in statuses after an id, in id order. Index: the
// primary key, filtered.
func (d *Dialect) consoleGroupErrors(source oncebox.DLQSource, eventType string, statuses []oncebox.DLQStatus, after *oncebox.EventID, limit int) dialects.Query {
	var b binder
	conds := dlqWhere(&b, dialects.DLQFilter{Source: source, EventType: eventType, Statuses: statuses}, nil)
	if after != nil {
		conds = append(conds, "id > "+b.P(d.EncodeID(*after)))
	}
	lim := b.P(limit)
	return b.Query(sqlkit.ConsoleGroupErrorsSQL(d.tables, conds, lim))
}

// consoleErrors builds a keyset page of the fingerprint view: the rows
// matching f after an id, in id order. Index: the primary key, filtered
// (or dlqWhere's indexes when f is narrow).
func (d *Dialect) consoleErrors(f dialects.DLQFilter, after *oncebox.EventID, limit int) dialects.Query {
	var b binder
	conds := dlqWhere(&b, f, nil)
	if after != nil {
		conds = append(conds, "id > "+b.P(d.EncodeID(*after)))
	}
	lim := b.P(limit)
	return b.Query(sqlkit.ConsoleErrorsSQL(d.tables, conds, lim))
}
