package sqlite

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// migrationsFS holds the numbered migration scripts of this database.
//
//go:embed migrations
var migrationsFS embed.FS

// migrationData is what the migration templates read: the qualified table
// names (CREATE TABLE schema.t), Index (schema.prefix_name, where SQLite
// wants the schema of a CREATE INDEX), and Bare, the names without the
// schema, as the ON clause of a CREATE INDEX must be written.
type migrationData struct {
	dialects.Tables
	Bare dialects.Tables
}

// Migrations implements Dialect.
func (d *Dialect) Migrations() ([]dialects.Migration, error) {
	bare := d.tables
	for _, p := range []*string{&bare.Events, &bare.DLQ, &bare.Inbox, &bare.Jobs, &bare.Migrations, &bare.Instances} {
		if i := strings.LastIndexByte(*p, '.'); i >= 0 {
			*p = (*p)[i+1:]
		}
	}
	return sqlkit.RenderMigrations(migrationsFS, "migrations", migrationData{Tables: d.tables, Bare: bare}, sqlkit.SplitStatements)
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
		Script: sqlkit.ScriptForm{Database: "SQLite", End: ";", Now: nowMicros},
	}
}

// nowMicros is SQLite's current time as the time columns hold it: unix
// microseconds (unixepoch('subsec') has millisecond precision).
const nowMicros = "CAST(unixepoch('subsec') * 1000000 AS INTEGER)"

// migrationLockTable is the table of the migration lock's one row.
func (d *Dialect) migrationLockTable() string { return d.tables.Migrations + "_lock" }

// migrationLock writes the lock row first in the migration transaction.
// SQLite has one writer per file: the write takes the file's write lock,
// held until the commit or rollback, so migrators in other processes (or
// on other pools) wait for it (busy_timeout) and then find the versions
// applied. With the DSN's _txlock=immediate the transaction holds that
// lock from its BEGIN already; without it, the first statement here
// takes it before any migration table is read.
func (d *Dialect) migrationLock() []dialects.Query {
	t := d.migrationLockTable()
	return []dialects.Query{
		{SQL: "CREATE TABLE IF NOT EXISTS " + t + " (id INTEGER PRIMARY KEY CHECK (id = 1), locked_at INTEGER NOT NULL)"},
		{SQL: "INSERT INTO " + t + " (id, locked_at) VALUES (1, " + nowMicros + `)
ON CONFLICT (id) DO UPDATE SET locked_at = excluded.locked_at`},
	}
}

// migrationUnlock is nothing: the commit releases the write lock.
func (d *Dialect) migrationUnlock() []dialects.Query { return nil }

// schemaCreate is nothing: a schema is an attached database, which the
// connection attaches (ATTACH DATABASE), not a migration.
func (d *Dialect) schemaCreate() []dialects.Query { return nil }

// migrationsTableCreate creates, if missing, the table of applied
// migration versions.
func (d *Dialect) migrationsTableCreate() dialects.Query {
	return dialects.Query{SQL: "CREATE TABLE IF NOT EXISTS " + d.tables.Migrations + ` (
    version    INTEGER   PRIMARY KEY,
    name       TEXT      NOT NULL,
    applied_at TIMESTAMP NOT NULL
)`}
}

// migrationsSelect selects the applied versions, one integer per row.
func (d *Dialect) migrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// migrationsInsert records version as applied at the given time, in
// microseconds. The zero time (MigrationScript's) stands for the
// database's own clock, which the script writes as nowMicros. Written with
// $n (SQLite and the driver take it too): sqlkit's script writer inlines
// $n and :n placeholders, not ?n.
func (d *Dialect) migrationsInsert(version int, name string, at time.Time) dialects.Query {
	var v any = us(at)
	if at.IsZero() {
		v = at
	}
	return dialects.Query{
		SQL:  "INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES ($1, $2, $3)",
		Args: []any{version, name, v},
	}
}

// errNoTestSchema: a test on SQLite takes a file of its own.
var errNoTestSchema = fmt.Errorf("%w: sqlite: no test schema (a schema is an attached database file): give the test a file of its own", oncebox.ErrInvalidInput)

func (d *Dialect) testSchemaCreate() (dialects.Query, error) {
	return dialects.Query{}, errNoTestSchema
}

func (d *Dialect) testSchemaDrop() (dialects.Query, error) { return dialects.Query{}, errNoTestSchema }

// CheckSchema implements dialects.Dialect: every migration applied (as
// sqlkit.CheckSchema), and the connection set up as docs/sqlite.md asks,
// each error naming the DSN parameter to add: times read back as times
// in microseconds (_inttotime=1&_time_integer_format=unix_micro), a busy
// timeout (_pragma=busy_timeout(10000)) and, for a file, WAL
// (_pragma=journal_mode(WAL)).
func (d *Dialect) CheckSchema(ctx context.Context, db wsql.ContextExecutor) error {
	if err := d.checkConnection(ctx, db); err != nil {
		return err
	}
	if err := sqlkit.CheckSchema(ctx, db, d); err != nil {
		if strings.Contains(err.Error(), "into type *time.Time") {
			return fmt.Errorf("%w (the SQLite DSN needs _inttotime=1&_time_integer_format=unix_micro: docs/sqlite.md)", err)
		}
		return err
	}
	return d.checkTimeFormat(ctx, db)
}

// checkConnection reads the busy timeout and the journal mode.
func (d *Dialect) checkConnection(ctx context.Context, db wsql.ContextExecutor) error {
	var timeout int64
	if err := queryOne(ctx, db, "PRAGMA busy_timeout", &timeout); err != nil {
		return fmt.Errorf("oncebox: sqlite: read busy_timeout: %w", err)
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: sqlite: busy_timeout is 0: a second writer would fail at once with SQLITE_BUSY; add _pragma=busy_timeout(10000) to the DSN (docs/sqlite.md)", oncebox.ErrInvalidConfig)
	}
	var mode string
	if err := queryOne(ctx, db, "PRAGMA "+d.schemaPrefix()+"journal_mode", &mode); err != nil {
		return fmt.Errorf("oncebox: sqlite: read journal_mode: %w", err)
	}
	// An in-memory database has no WAL ("memory"): nothing else can open it.
	if m := strings.ToLower(mode); m != "wal" && m != "memory" {
		return fmt.Errorf("%w: sqlite: journal_mode is %s, not wal: readers would block the relay's writes; add _pragma=journal_mode(WAL) to the DSN (docs/sqlite.md)", oncebox.ErrInvalidConfig, mode)
	}
	return nil
}

// checkTimeFormat reads one applied_at both as the driver converts it and
// as the stored integer: they differ when the driver reads microseconds
// as seconds or milliseconds (_inttotime without _time_integer_format).
func (d *Dialect) checkTimeFormat(ctx context.Context, db wsql.ContextExecutor) error {
	rows, err := db.QueryContext(ctx, "SELECT applied_at, applied_at + 0 FROM "+d.tables.Migrations+" ORDER BY version LIMIT 1")
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		return sqlkit.RowsErr(rows)
	}
	var asTime time.Time
	var stored int64
	if err := rows.Scan(&asTime, &stored); err != nil {
		return fmt.Errorf("oncebox: sqlite: read %s: %w", d.tables.Migrations, err)
	}
	if !asTime.Equal(time.UnixMicro(stored)) {
		return fmt.Errorf("%w: sqlite: the driver reads the time %d (microseconds) as %s: add _time_integer_format=unix_micro to the DSN (docs/sqlite.md)",
			oncebox.ErrInvalidConfig, stored, asTime.UTC().Format(time.RFC3339Nano))
	}
	return sqlkit.RowsErr(rows)
}

// schemaPrefix is "schema." of the tables' attached database, or "".
func (d *Dialect) schemaPrefix() string {
	if i := strings.LastIndexByte(d.tables.Events, '.'); i >= 0 {
		return d.tables.Events[:i+1]
	}
	return ""
}

// queryOne runs q, which returns one row of one column, into dst.
func queryOne(ctx context.Context, db wsql.ContextExecutor, q string, dst any) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := sqlkit.RowsErr(rows); err != nil {
			return err
		}
		return fmt.Errorf("%s returned no row", q)
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	return sqlkit.RowsErr(rows)
}
