package postgres

import (
	"embed"
	"strconv"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// migrationsFS holds the numbered migration scripts of this database.
//
//go:embed migrations
var migrationsFS embed.FS

// postgresMaxBindParams is PostgreSQL's limit on parameters per statement
// (the wire protocol counts them in an int16).
const postgresMaxBindParams = 65535

// PostgreSQL is the dialect of PostgreSQL 12 and later (tested on 15).
type Dialect struct {
	schema  string
	tables  dialects.Tables
	lockKey int64
	insert1 string
}

var _ dialects.Dialect = (*Dialect)(nil)

// NewPostgreSQL returns the PostgreSQL dialect for the tables placed by cfg.
// The error names the schema or prefix when it is not a plain identifier.
func New(cfg oncebox.TablesConfig) (*Dialect, error) {
	t, err := dialects.NewTables(cfg)
	if err != nil {
		return nil, err
	}
	d := &Dialect{schema: cfg.Schema, tables: t, lockKey: sqlkit.AdvisoryKey(t.Migrations)}
	d.insert1 = d.eventsInsertSQL(1)
	return d, nil
}

// Name implements Dialect.
func (d *Dialect) Name() string { return "postgres" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// Features implements Dialect.
func (d *Dialect) Features() dialects.Features {
	return dialects.Features{
		Placeholder:     dialects.PlaceholderDollar,
		Returning:       true,
		SkipLocked:      dialects.SkipLockedCTE,
		IDType:          "uuid",
		InsertIgnore:    dialects.InsertOnConflictDoNothing,
		MaxBindParams:   postgresMaxBindParams,
		ReadCommittedTx: sqlkit.ReadCommitted,
	}
}

// EncodeID implements Dialect: the canonical text form, which both pgx and
// database/sql drivers send as a uuid.
func (d *Dialect) EncodeID(id oncebox.EventID) any { return id.String() }

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

// MaxRowsPerInsert implements Dialect.
func (d *Dialect) MaxRowsPerInsert() int { return postgresMaxBindParams / sqlkit.EventInsertParams }

// EventsInsert implements Dialect: one multi-row INSERT. Each row takes eight
// parameters; the creation time is bound once and used for next_retry_at,
// created_at and updated_at.
func (d *Dialect) EventsInsert(rows []dialects.EventRow) dialects.Query {
	args := make([]any, 0, len(rows)*sqlkit.EventInsertParams)
	for _, r := range rows {
		key := sqlkit.Nullable(r.Key)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, key, r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, r.CreatedAt)
	}
	if len(rows) == 1 && d.insert1 != "" {
		return dialects.Query{SQL: d.insert1, Args: args}
	}
	return dialects.Query{SQL: d.eventsInsertSQL(len(rows)), Args: args}
}

// eventsInsertSQL builds the INSERT text for n rows.
func (d *Dialect) eventsInsertSQL(n int) string {
	b := make([]byte, 0, 160+n*48)
	b = append(b, "INSERT INTO "...)
	b = append(b, d.tables.Events...)
	b = append(b, " ("+sqlkit.EventInsertColumns+") VALUES "...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		base := i * sqlkit.EventInsertParams
		b = append(b, '(')
		for k := 1; k <= 7; k++ {
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(base+k), 10)
			b = append(b, ',')
		}
		b = append(b, "'PENDING',0"...)
		for range 3 {
			b = append(b, ",$"...)
			b = strconv.AppendInt(b, int64(base+8), 10)
		}
		b = append(b, ')')
	}
	return string(b)
}

// Notify implements Dialect: pg_notify takes the channel as text, so it
// needs no quoting. PostgreSQL delivers the notification only if the
// transaction commits and folds identical ones of a transaction into one;
// the commit takes a global lock on the notification queue, which is why
// the publisher limits how often it notifies (docs/design.md, "Wake-up on
// commit").
func (d *Dialect) Notify(channel, payload string) dialects.Query {
	return dialects.Query{SQL: "SELECT pg_notify($1, $2)", Args: []any{channel, payload}}
}

// Database is PostgreSQL as the registry lists it.
var Database = dialects.Database{
	Name:           "postgres",
	New:            func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	DriverPackages: []string{"jackc/pgx", "lib/pq"},
	URLSchemes:     []string{"postgres", "postgresql"},
	IsTransient:    IsTransient,
	TestSchema:     true,
}
