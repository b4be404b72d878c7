package postgres

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// databaseNow is DatabaseTime's statement: clock_timestamp(), the time of the
// reading itself (now() would be the transaction's start).
func (d *Dialect) databaseNow() dialects.Query {
	return dialects.Query{SQL: "SELECT " + sqlkit.PostgresNow}
}

// DatabaseTime implements dialects.Relay with databaseNow.
func (d *Dialect) DatabaseTime(ctx context.Context, db wsql.ContextExecutor) (time.Time, error) {
	return sqlkit.DatabaseTime(ctx, db, d.Name(), d.databaseNow())
}
