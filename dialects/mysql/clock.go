package mysql

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// databaseNow is DatabaseTime's statement: UTC_TIMESTAMP(6), whatever the
// session's time zone.
func (d *Dialect) databaseNow() dialects.Query {
	return dialects.Query{SQL: "SELECT " + sqlkit.MysqlNowUTC}
}

// DatabaseTime implements dialects.Relay with databaseNow.
func (d *Dialect) DatabaseTime(ctx context.Context, db wsql.ContextExecutor) (time.Time, error) {
	return sqlkit.DatabaseTime(ctx, db, d.Name(), d.databaseNow())
}
