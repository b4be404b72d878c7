package sqlkit

import (
	"context"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// InspectorStatements are a database's builders of the statements that
// read the tables as a whole.
type InspectorStatements struct {
	// Backlog counts the outbox rows by event type and status with the
	// oldest created_at of each group, and the DLQ rows by source and
	// status (oldest NULL): columns kind ('outbox' or 'dlq'), key, status,
	// count, oldest.
	Backlog func() dialects.Query
	// EventsList selects every row of the outbox table in id order,
	// columns in the order of StoredEvent.ScanTargets.
	EventsList func() dialects.Query
}

// Inspector runs the statements built by S: it implements
// dialects.Inspector for every database that embeds it.
type Inspector struct{ S InspectorStatements }

// Backlog implements dialects.Inspector.
func (r Inspector) Backlog(ctx context.Context, db wsql.ContextExecutor) ([]dialects.BacklogRow, error) {
	q := r.S.Backlog()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.BacklogRow
	for rows.Next() {
		var g dialects.BacklogRow
		var table string
		if err := rows.Scan(&table, &g.Key, &g.Status, &g.Count, &g.Oldest); err != nil {
			return nil, err
		}
		g.Table = dialects.BacklogTable(table)
		out = append(out, g)
	}
	return out, RowsErr(rows)
}

// EventsList implements dialects.Inspector.
func (r Inspector) EventsList(ctx context.Context, db wsql.ContextExecutor) ([]dialects.StoredEvent, error) {
	q := r.S.EventsList()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.StoredEvent
	for rows.Next() {
		var e dialects.StoredEvent
		if err := rows.Scan(e.ScanTargets()...); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, RowsErr(rows)
}
