package sqlite

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// databaseNow is DatabaseTime's statement: the clock of the process that
// runs SQLite (there is no server), in microseconds; unixepoch('subsec')
// reads it to the millisecond.
func (d *Dialect) databaseNow() dialects.Query {
	return dialects.Query{SQL: "SELECT " + nowMicros}
}

// DatabaseTime implements dialects.Relay with databaseNow.
func (d *Dialect) DatabaseTime(ctx context.Context, db wsql.ContextExecutor) (time.Time, error) {
	q := d.databaseNow()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := sqlkit.RowsErr(rows); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, fmt.Errorf("oncebox: %s returned no row", q.SQL)
	}
	var at time.Time
	if err := rows.Scan(microTime{&at}); err != nil {
		return time.Time{}, fmt.Errorf("oncebox: read the database's clock: %w", err)
	}
	return at, sqlkit.RowsErr(rows)
}
