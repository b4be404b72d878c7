package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// Migrator is the dialect's part in the schema's life: the steps of a
// migration, which package migrate runs in one transaction under the
// dialect's migration lock, the script of a migration for a team that
// applies the schema with its own tool, the relay's start-up check, and the
// schemas of tests (package oncetest).
//
// The steps run in the migration transaction tx, in this order:
// LockMigrations, EnsureMigrationsTable, AppliedMigrations, ApplyMigration
// for each migration not applied yet, UnlockMigrations, then the commit.
// UnlockMigrations also runs before a rollback once the lock is taken: a
// session-level lock (MySQL's GET_LOCK, Oracle's DBMS_LOCK) outlives the
// transaction.
type Migrator interface {
	// Migrations returns the schema's migrations, rendered for Tables().
	Migrations() ([]Migration, error)
	// LockMigrations takes the lock that serialises concurrent migrations
	// of these tables, waiting for another migration to end (10 minutes at
	// most on MySQL and Oracle). It runs first in the migration
	// transaction.
	LockMigrations(ctx context.Context, tx wsql.ContextExecutor) error
	// EnsureMigrationsTable creates the configured schema (PostgreSQL's
	// schema, MySQL's database; never Oracle's, which is a user) and the
	// table of applied migration versions, each only when missing. It runs
	// under the lock, so that instances that start at once do not race on
	// them.
	EnsureMigrationsTable(ctx context.Context, tx wsql.ContextExecutor) error
	// AppliedMigrations returns the versions recorded in the migrations
	// table, in increasing order.
	AppliedMigrations(ctx context.Context, db wsql.ContextExecutor) ([]int, error)
	// ApplyMigration runs the statements of m in order and records its
	// version as applied at at. The error names m and the statement that
	// failed ("0002_claim_order.sql statement 3: …", "record
	// 0002_claim_order.sql: …").
	ApplyMigration(ctx context.Context, tx wsql.ContextExecutor, m Migration, at time.Time) error
	// UnlockMigrations releases the lock of LockMigrations; it does nothing
	// where the commit or rollback releases it (PostgreSQL's
	// transaction-level advisory lock).
	UnlockMigrations(ctx context.Context, tx wsql.ContextExecutor) error
	// MigrationScript returns m as the statements Migrate runs for it, with
	// no bind parameters, for a team that applies the schema with its own
	// tool (goose, Flyway, Atlas, psql): the creation of the configured
	// schema (if any) and of the migrations table when missing, m's own
	// statements, and the INSERT that records m's version with the
	// database's current time. Package migrate writes it out
	// (migrate.Statements, `oncebox migrate --print-sql`).
	MigrationScript(m Migration) (MigrationScript, error)
	// CheckSchema tells whether db can serve the dialect's tables: the
	// database answers, every migration has been applied, and a timestamp
	// reads back as a time (MySQL's DSN needs parseTime=true). The relay
	// runs it when it starts, so that a relay whose database cannot work
	// returns an error from Run instead of logging the same failure forever.
	CheckSchema(ctx context.Context, db wsql.ContextExecutor) error
	// CreateTestSchema creates the configured schema (PostgreSQL's schema,
	// MySQL's database), which must not exist yet, with the server's
	// defaults: package oncetest gives each test one of its own. It fails
	// without a configured schema, and on a database whose Database entry
	// has no TestSchema (Oracle, where a schema is a user).
	CreateTestSchema(ctx context.Context, db wsql.ContextExecutor) error
	// DropTestSchema drops the configured schema and everything in it, if
	// it exists: the end of CreateTestSchema's schema.
	DropTestSchema(ctx context.Context, db wsql.ContextExecutor) error
}

// MigrationScript is one migration written out for the database's own
// client or a migration tool (Migrator.MigrationScript).
type MigrationScript struct {
	// Database names the database in the script's heading: "PostgreSQL",
	// "MySQL/MariaDB", "Oracle".
	Database string
	// Statements run in order, each on its own, with no bind parameters.
	Statements []string
	// End ends each statement in the script's text: ";", or "\n/" (a line
	// holding "/", as SQL*Plus, SQLcl and Flyway read PL/SQL blocks).
	End string
}
