package mysql

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

// mysqlLockTimeout is how long, in seconds, Migrate waits for another
// instance's migration before failing.
const mysqlLockTimeout = 600

// Migrations implements Dialect.
func (d *Dialect) Migrations() ([]dialects.Migration, error) {
	return sqlkit.RenderMigrations(migrationsFS, "migrations", d.templateData(), sqlkit.SplitStatements)
}

// mysqlTemplateData is what the MySQL migrations are rendered with: the
// tables, and what migration 3 needs to look a column up in
// information_schema (MySQL 8 has no ADD COLUMN IF NOT EXISTS).
type mysqlTemplateData struct {
	dialects.Tables
	// SchemaExpr is the tables' database as SQL: a quoted name, or
	// DATABASE() when the DSN's database holds them.
	SchemaExpr string
	// EventsTable is the outbox table's name without the database.
	EventsTable string
	// DLQTable is the DLQ table's name without the database (migration 4
	// looks its indexes up).
	DLQTable string
}

func (d *Dialect) templateData() mysqlTemplateData {
	// Both come from validated identifiers (letters, digits, underscores),
	// so quoting them as literals is safe.
	schema := "DATABASE()"
	if d.schema != "" {
		schema = "'" + d.schema + "'"
	}
	return mysqlTemplateData{Tables: d.tables, SchemaExpr: schema, EventsTable: d.tables.Prefix + "outbox_events",
		DLQTable: d.tables.Prefix + "outbox_dlq_events"}
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
		Script: sqlkit.ScriptForm{Database: "MySQL/MariaDB", End: ";", Now: "UTC_TIMESTAMP(6)"},
	}
}

// migrationLock is a named session lock: GET_LOCK
// survives the implicit commits of DDL, which a row lock would not. GET_LOCK
// returns 0 on timeout instead of failing, and Migrate runs the lock with
// Exec, which drops results: the second statement turns "not taken" into an
// error (a scalar subquery of two rows, error 1242 "Subquery returns more
// than 1 row") so that a migration never runs without the lock. It is a
// SELECT, not DO: MariaDB's DO does not run the subquery to its second row.
func (d *Dialect) migrationLock() []dialects.Query {
	return []dialects.Query{
		{SQL: "SET @oncebox_migration_lock = GET_LOCK(" + d.lockNameSQL() + ", ?)", Args: []any{d.lockName, mysqlLockTimeout}},
		{SQL: "SELECT (SELECT 'oncebox: the migration lock is held by another migration' FROM (SELECT 1 AS n UNION ALL SELECT 2) AS t" +
			" WHERE COALESCE(@oncebox_migration_lock, 0) <> 1)"},
	}
}

// schemaCreate creates the configured database, if any and missing. It
// runs under the migration lock.
func (d *Dialect) schemaCreate() []dialects.Query {
	if d.schema == "" {
		return nil
	}
	return []dialects.Query{{SQL: "CREATE DATABASE IF NOT EXISTS " + d.schema + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"}}
}

// migrationUnlock releases the session lock, which outlives the
// transaction.
func (d *Dialect) migrationUnlock() []dialects.Query {
	return []dialects.Query{{SQL: "DO RELEASE_LOCK(" + d.lockNameSQL() + ")", Args: []any{d.lockName}}}
}

// lockNameSQL is the migration lock's name as SQL, of one argument (the
// dialect's lockName, hashed from the migrations table's name). GET_LOCK
// names are server-wide: with tables.schema the table's name holds its
// database; without it the tables live in the DSN's database, which only
// the session knows, so the name takes a hash of DATABASE() too (else two
// services in two databases of one server would share the lock). The name
// is at most 32 + 1 + 16 = 49 characters (GET_LOCK allows 64). DATABASE()
// does not change between the lock and the unlock: Migrate runs both on
// one connection and no migration runs USE.
func (d *Dialect) lockNameSQL() string {
	if d.schema != "" {
		return "?"
	}
	return "CONCAT(?, '-', LEFT(SHA2(COALESCE(DATABASE(), ''), 256), 16))"
}

// migrationsTableCreate creates, if missing, the table of applied
// migration versions.
func (d *Dialect) migrationsTableCreate() dialects.Query {
	return dialects.Query{SQL: "CREATE TABLE IF NOT EXISTS " + d.tables.Migrations + ` (
    version    INT          NOT NULL,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
}

// migrationsSelect selects the applied versions, one integer per row.
func (d *Dialect) migrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// migrationsInsert records version as applied at the given time.
func (d *Dialect) migrationsInsert(version int, name string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL:  "INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES (?, ?, ?)",
		Args: []any{version, name, sqlkit.MicroUTC(at)},
	}
}

// testSchemaCreate creates the configured database for a test, with the
// server's default character set (a test's own tables there get the
// defaults they would get elsewhere; oncebox's tables name theirs): without
// IF NOT EXISTS, so that a test never takes, and at its end drops, a
// database it did not make.
func (d *Dialect) testSchemaCreate() (dialects.Query, error) {
	if d.schema == "" {
		return dialects.Query{}, sqlkit.ErrNoTestSchema
	}
	return dialects.Query{SQL: "CREATE DATABASE " + d.schema}, nil
}

// testSchemaDrop drops the configured database and everything in it.
func (d *Dialect) testSchemaDrop() (dialects.Query, error) {
	if d.schema == "" {
		return dialects.Query{}, sqlkit.ErrNoTestSchema
	}
	return dialects.Query{SQL: "DROP DATABASE IF EXISTS " + d.schema}, nil
}
