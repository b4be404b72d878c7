package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// Migrator is the dialect's part in the schema's life: the migrations and
// the statements that apply them under a lock (package migrate), and the
// relay's start-up check.
type Migrator interface {
	// Migrations returns the schema's migrations, rendered for Tables().
	Migrations() ([]Migration, error)
	// MigrationLock returns the statements that take the lock serialising
	// concurrent migrations; they run first in the migration transaction.
	MigrationLock() []Query
	// SchemaCreate returns the statements that create the configured schema
	// when it is missing (none without a schema); they run under the lock.
	SchemaCreate() []Query
	// MigrationUnlock returns the statements that release that lock; they run
	// last, before commit (empty when the lock is released by the commit).
	MigrationUnlock() []Query
	// MigrationsTableCreate creates, if missing, the table of applied
	// migration versions.
	MigrationsTableCreate() Query
	// MigrationsSelect selects the applied versions, one integer per row.
	MigrationsSelect() Query
	// MigrationsInsert records version as applied at the given time.
	MigrationsInsert(version int, name string, at time.Time) Query
	// CheckSchema tells whether db can serve the dialect's tables: the
	// database answers, every migration has been applied, and a timestamp
	// reads back as a time (MySQL's DSN needs parseTime=true). The relay
	// runs it when it starts, so that a relay whose database cannot work
	// returns an error from Run instead of logging the same failure forever.
	CheckSchema(ctx context.Context, db wsql.ContextExecutor) error
}
