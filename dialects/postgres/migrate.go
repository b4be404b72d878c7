package postgres

import (
	"context"
	"embed"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// CheckSchema implements dialects.Dialect.
func (d *Dialect) CheckSchema(ctx context.Context, db wsql.ContextExecutor) error {
	return sqlkit.CheckSchema(ctx, db, d)
}

// migrationsFS holds the numbered migration scripts of this database.
//
//go:embed migrations
var migrationsFS embed.FS

// Migrations implements Dialect.
func (d *Dialect) Migrations() ([]dialects.Migration, error) {
	return sqlkit.RenderMigrations(migrationsFS, "migrations", d.tables, sqlkit.SplitStatements)
}

// MigrationLock implements Dialect with a transaction-level advisory lock:
// instances that start at once queue here, and the lock goes with the commit
// or rollback, so a crashed migrator never leaves it held.
func (d *Dialect) MigrationLock() []dialects.Query {
	return []dialects.Query{{SQL: "SELECT pg_advisory_xact_lock($1)", Args: []any{d.lockKey}}}
}

// SchemaCreate implements Dialect: the configured schema, if any and
// missing. It runs under the migration lock, so instances that start at once
// do not race on it.
func (d *Dialect) SchemaCreate() []dialects.Query {
	if d.schema == "" {
		return nil
	}
	return []dialects.Query{{SQL: "CREATE SCHEMA IF NOT EXISTS " + d.schema}}
}

// MigrationUnlock implements Dialect: nothing, the commit releases the lock.
func (d *Dialect) MigrationUnlock() []dialects.Query { return nil }

// MigrationsTableCreate implements Dialect.
func (d *Dialect) MigrationsTableCreate() dialects.Query {
	return dialects.Query{SQL: "CREATE TABLE IF NOT EXISTS " + d.tables.Migrations + ` (
    version    integer      PRIMARY KEY,
    name       varchar(255) NOT NULL,
    applied_at timestamptz  NOT NULL
)`}
}

// MigrationsSelect implements Dialect.
func (d *Dialect) MigrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// MigrationsInsert implements Dialect.
func (d *Dialect) MigrationsInsert(version int, name string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL:  "INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES ($1, $2, $3)",
		Args: []any{version, name, at},
	}
}
