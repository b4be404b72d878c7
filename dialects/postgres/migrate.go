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
	ms, err := sqlkit.RenderMigrations(migrationsFS, "migrations", d.tables, sqlkit.SplitStatements)
	if err != nil || !d.partitions.Enabled() {
		return ms, err
	}
	return append(ms, d.partitionMigration()), nil
}

// migrator returns the runner of the migration steps over this dialect's
// statements.
func (d *Dialect) migrator() sqlkit.Migrator {
	return sqlkit.Migrator{
		S: sqlkit.MigratorStatements{
			Lock:             d.migrationLock,
			Unlock:           d.migrationUnlock,
			SchemaCreate:     d.schemaCreate,
			TableCreate:      d.migrationsTableCreate,
			Applied:          d.migrationsSelect,
			Record:           d.migrationsInsert,
			TestSchemaCreate: d.testSchemaCreate,
			TestSchemaDrop:   d.testSchemaDrop,
		},
		Script: sqlkit.ScriptForm{Database: "PostgreSQL", End: ";", Now: "now()"},
	}
}

// migrationLock is a transaction-level advisory lock:
// instances that start at once queue here, and the lock goes with the commit
// or rollback, so a crashed migrator never leaves it held.
func (d *Dialect) migrationLock() []dialects.Query {
	return []dialects.Query{{SQL: "SELECT pg_advisory_xact_lock($1)", Args: []any{d.lockKey}}}
}

// schemaCreate creates the configured schema, if any and missing. It runs under the migration lock, so instances that start at once
// do not race on it.
func (d *Dialect) schemaCreate() []dialects.Query {
	if d.schema == "" {
		return nil
	}
	return []dialects.Query{{SQL: "CREATE SCHEMA IF NOT EXISTS " + d.schema}}
}

// migrationUnlock is nothing: the commit releases the lock.
func (d *Dialect) migrationUnlock() []dialects.Query { return nil }

// migrationsTableCreate creates, if missing, the table of applied
// migration versions.
func (d *Dialect) migrationsTableCreate() dialects.Query {
	return dialects.Query{SQL: "CREATE TABLE IF NOT EXISTS " + d.tables.Migrations + ` (
    version    integer      PRIMARY KEY,
    name       varchar(255) NOT NULL,
    applied_at timestamptz  NOT NULL
)`}
}

// migrationsSelect selects the applied versions, one integer per row.
func (d *Dialect) migrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// migrationsInsert records version as applied at the given time.
func (d *Dialect) migrationsInsert(version int, name string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL:  "INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES ($1, $2, $3)",
		Args: []any{version, name, at},
	}
}

// testSchemaCreate creates the configured schema for a test: without IF NOT
// EXISTS, so that a test never takes, and at its end drops, a schema it did
// not make.
func (d *Dialect) testSchemaCreate() (dialects.Query, error) {
	if d.schema == "" {
		return dialects.Query{}, sqlkit.ErrNoTestSchema
	}
	return dialects.Query{SQL: "CREATE SCHEMA " + d.schema}, nil
}

// testSchemaDrop drops the configured schema and everything in it.
func (d *Dialect) testSchemaDrop() (dialects.Query, error) {
	if d.schema == "" {
		return dialects.Query{}, sqlkit.ErrNoTestSchema
	}
	return dialects.Query{SQL: "DROP SCHEMA IF EXISTS " + d.schema + " CASCADE"}, nil
}
