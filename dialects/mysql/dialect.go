package mysql

import (
	"embed"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// migrationsFS holds the numbered migration scripts of this database.
//
//go:embed migrations
var migrationsFS embed.FS

// mysqlMaxBindParams is the most placeholders one prepared statement may
// carry on MySQL and MariaDB (the protocol counts them in 16 bits).
const mysqlMaxBindParams = 65535

// mysqlMaxIDsPerStatement bounds the ids of one IN (…) list the run methods
// write, leaving room for the statement's other parameters.
const mysqlMaxIDsPerStatement = 10_000

// mysqlLockTimeout is how long, in seconds, Migrate waits for another
// instance's migration before failing.
const mysqlLockTimeout = 600

// MySQL is the dialect of MySQL 8.0.1+ and MariaDB 10.6+, the versions with
// FOR UPDATE SKIP LOCKED (tested on MariaDB 10.11). The DSN of
// go-sql-driver/mysql must set parseTime=true and loc=UTC: times are
// DATETIME(6) columns holding UTC. See docs/mysql.md.
type Dialect struct {
	schema   string
	tables   dialects.Tables
	lockName string
}

var _ dialects.Dialect = (*Dialect)(nil)

// NewMySQL returns the MySQL/MariaDB dialect for the tables placed by cfg.
// cfg.Schema is a MySQL database: the tables are written db.table; without
// it they live in the DSN's database. The error names the schema or prefix
// when it is not a plain identifier.
func New(cfg oncebox.TablesConfig) (*Dialect, error) {
	t, err := dialects.NewTables(cfg)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte("oncebox-migrate:" + t.Migrations))
	// GET_LOCK names are at most 64 characters and server-wide.
	name := fmt.Sprintf("oncebox-migrate-%016x", h.Sum64())
	return &Dialect{schema: cfg.Schema, tables: t, lockName: name}, nil
}

// Name implements Dialect.
func (d *Dialect) Name() string { return "mysql" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// Features implements Dialect.
func (d *Dialect) Features() dialects.Features {
	return dialects.Features{
		Placeholder:     dialects.PlaceholderQuestion,
		Returning:       false,
		SkipLocked:      dialects.SkipLockedSelectThenUpdate,
		IDType:          "BINARY(16)",
		InsertIgnore:    dialects.InsertIgnore,
		MaxBindParams:   mysqlMaxBindParams,
		ReadCommittedTx: sqlkit.ReadCommitted,
	}
}

// EncodeID implements Dialect: the 16 bytes of the UUIDv7, so that the
// BINARY(16) primary key keeps time order.
func (d *Dialect) EncodeID(id oncebox.EventID) any {
	b := make([]byte, 16)
	copy(b, id[:])
	return b
}

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

// MigrationLock implements Dialect with a named session lock: GET_LOCK
// survives the implicit commits of DDL, which a row lock would not. GET_LOCK
// returns 0 on timeout instead of failing, and Migrate runs the lock with
// Exec, which drops results: the second statement turns "not taken" into an
// error (a scalar subquery of two rows, error 1242 "Subquery returns more
// than 1 row") so that a migration never runs without the lock. It is a
// SELECT, not DO: MariaDB's DO does not run the subquery to its second row.
func (d *Dialect) MigrationLock() []dialects.Query {
	return []dialects.Query{
		{SQL: "SET @oncebox_migration_lock = GET_LOCK(?, ?)", Args: []any{d.lockName, mysqlLockTimeout}},
		{SQL: "SELECT (SELECT 'oncebox: the migration lock is held by another migration' FROM (SELECT 1 AS n UNION ALL SELECT 2) AS t" +
			" WHERE COALESCE(@oncebox_migration_lock, 0) <> 1)"},
	}
}

// SchemaCreate implements Dialect: the configured database, if any and
// missing. It runs under the migration lock.
func (d *Dialect) SchemaCreate() []dialects.Query {
	if d.schema == "" {
		return nil
	}
	return []dialects.Query{{SQL: "CREATE DATABASE IF NOT EXISTS " + d.schema + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"}}
}

// MigrationUnlock implements Dialect: the session lock outlives the
// transaction, so it is released explicitly.
func (d *Dialect) MigrationUnlock() []dialects.Query {
	return []dialects.Query{{SQL: "DO RELEASE_LOCK(?)", Args: []any{d.lockName}}}
}

// MigrationsTableCreate implements Dialect.
func (d *Dialect) MigrationsTableCreate() dialects.Query {
	return dialects.Query{SQL: "CREATE TABLE IF NOT EXISTS " + d.tables.Migrations + ` (
    version    INT          NOT NULL,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
}

// MigrationsSelect implements Dialect.
func (d *Dialect) MigrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// MigrationsInsert implements Dialect.
func (d *Dialect) MigrationsInsert(version int, name string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL:  "INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES (?, ?, ?)",
		Args: []any{version, name, sqlkit.MicroUTC(at)},
	}
}

// MaxRowsPerInsert implements Dialect.
func (d *Dialect) MaxRowsPerInsert() int { return mysqlMaxBindParams / sqlkit.EventInsertParams }

// EventsInsert implements Dialect: one multi-row INSERT of eight parameters
// per row. MySQL placeholders cannot be reused, so the creation time is
// written into next_retry_at and updated_at by referring to the created_at
// value of the same row.
func (d *Dialect) EventsInsert(rows []dialects.EventRow) dialects.Query {
	args := make([]any, 0, len(rows)*sqlkit.EventInsertParams)
	for _, r := range rows {
		key := sqlkit.Nullable(r.Key)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, key, r.MessageUUID,
			sqlkit.NonNilBytes(r.Payload), r.Metadata, sqlkit.MicroUTC(r.CreatedAt))
	}
	var b strings.Builder
	b.Grow(200 + len(rows)*44)
	b.WriteString("INSERT INTO " + d.tables.Events +
		" (id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at," +
		" status, retry_count, next_retry_at, updated_at) VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,'PENDING',0,created_at,created_at)")
	}
	return dialects.Query{SQL: b.String(), Args: args}
}

// Backlog implements Dialect.
func (d *Dialect) Backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "CAST(NULL AS DATETIME(6))")}
}

// ids returns the encoded ids as arguments.
func (d *Dialect) ids(ids []oncebox.EventID) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = d.EncodeID(id)
	}
	return out
}

// inList returns "(?,?,…)" with n placeholders.
func inList(n int) string {
	if n == 0 {
		// An empty IN list is a syntax error; (NULL) matches nothing.
		return "(NULL)"
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
}

// hexID returns id as a MySQL hexadecimal literal, X'…'. Written from bytes
// only, it is safe to put into SQL text; statements that list many ids per
// row use it to stay under the bind parameter limit.
func hexID(id oncebox.EventID) string { return "X'" + hex.EncodeToString(id[:]) + "'" }

// Notify implements Dialect: MySQL and MariaDB have no notification on
// commit, so the relay polls only.
func (d *Dialect) Notify(string, string) dialects.Query { return dialects.Query{} }

// Database is MySQL and MariaDB as the registry lists them.
var Database = dialects.Database{
	Name:           "mysql",
	Aliases:        []string{"mariadb"},
	New:            func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	DriverPackages: []string{"go-sql-driver/mysql"},
	URLSchemes:     []string{"mysql", "mariadb"},
	IsTransient:    IsTransient,
	TestSchema:     true,
}
