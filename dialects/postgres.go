package dialects

import (
	"bytes"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtext"
)

//go:embed migrations
var migrationsFS embed.FS

// eventInsertColumns is the column list of EventsInsert, shared with the
// dialects that insert the same way.
const eventInsertColumns = "id, event_type, topic, partition_key, message_uuid, payload, metadata, " +
	"status, retry_count, next_retry_at, created_at, updated_at"

// eventInsertParams is the number of bind parameters per inserted row.
const eventInsertParams = 8

// postgresMaxBindParams is PostgreSQL's limit on parameters per statement
// (the wire protocol counts them in an int16).
const postgresMaxBindParams = 65535

// PostgreSQL is the dialect of PostgreSQL 12 and later (tested on 15).
type PostgreSQL struct {
	schema  string
	tables  Tables
	lockKey int64
	insert1 string
}

var _ Dialect = (*PostgreSQL)(nil)

// NewPostgreSQL returns the PostgreSQL dialect for the tables placed by cfg.
// The error names the schema or prefix when it is not a plain identifier.
func NewPostgreSQL(cfg oncebox.TablesConfig) (*PostgreSQL, error) {
	t, err := NewTables(cfg)
	if err != nil {
		return nil, err
	}
	d := &PostgreSQL{schema: cfg.Schema, tables: t, lockKey: advisoryKey(t.Migrations)}
	d.insert1 = d.eventsInsertSQL(1)
	return d, nil
}

// advisoryKey derives the advisory lock key from the migrations table name so
// that schemas migrated side by side do not wait on each other.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("oncebox-migrate:" + name))
	return int64(h.Sum64())
}

// Name implements Dialect.
func (d *PostgreSQL) Name() string { return "postgres" }

// Tables implements Dialect.
func (d *PostgreSQL) Tables() Tables { return d.tables }

// Features implements Dialect.
func (d *PostgreSQL) Features() Features {
	return Features{
		Placeholder:     PlaceholderDollar,
		Returning:       true,
		SkipLocked:      SkipLockedCTE,
		IDType:          "uuid",
		InsertIgnore:    InsertOnConflictDoNothing,
		MaxBindParams:   postgresMaxBindParams,
		ReadCommittedTx: readCommitted,
	}
}

// EncodeID implements Dialect: the canonical text form, which both pgx and
// database/sql drivers send as a uuid.
func (d *PostgreSQL) EncodeID(id oncebox.EventID) any { return id.String() }

// Migrations implements Dialect.
func (d *PostgreSQL) Migrations() ([]Migration, error) {
	return renderMigrations("migrations/postgres", d.tables)
}

// MigrationLock implements Dialect with a transaction-level advisory lock:
// instances that start at once queue here, and the lock goes with the commit
// or rollback, so a crashed migrator never leaves it held.
func (d *PostgreSQL) MigrationLock() []Query {
	return []Query{{SQL: "SELECT pg_advisory_xact_lock($1)", Args: []any{d.lockKey}}}
}

// SchemaCreate implements Dialect: the configured schema, if any and
// missing. It runs under the migration lock, so instances that start at once
// do not race on it.
func (d *PostgreSQL) SchemaCreate() []Query {
	if d.schema == "" {
		return nil
	}
	return []Query{{SQL: "CREATE SCHEMA IF NOT EXISTS " + d.schema}}
}

// MigrationUnlock implements Dialect: nothing, the commit releases the lock.
func (d *PostgreSQL) MigrationUnlock() []Query { return nil }

// MigrationsTableCreate implements Dialect.
func (d *PostgreSQL) MigrationsTableCreate() Query {
	return Query{SQL: "CREATE TABLE IF NOT EXISTS " + d.tables.Migrations + ` (
    version    integer      PRIMARY KEY,
    name       varchar(255) NOT NULL,
    applied_at timestamptz  NOT NULL
)`}
}

// MigrationsSelect implements Dialect.
func (d *PostgreSQL) MigrationsSelect() Query {
	return Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// MigrationsInsert implements Dialect.
func (d *PostgreSQL) MigrationsInsert(version int, name string, at time.Time) Query {
	return Query{
		SQL:  "INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES ($1, $2, $3)",
		Args: []any{version, name, at},
	}
}

// MaxRowsPerInsert implements Dialect.
func (d *PostgreSQL) MaxRowsPerInsert() int { return postgresMaxBindParams / eventInsertParams }

// EventsInsert implements Dialect: one multi-row INSERT. Each row takes eight
// parameters; the creation time is bound once and used for next_retry_at,
// created_at and updated_at.
func (d *PostgreSQL) EventsInsert(rows []EventRow) Query {
	args := make([]any, 0, len(rows)*eventInsertParams)
	for _, r := range rows {
		key := nullable(r.Key)
		args = append(args, d.EncodeID(r.ID), r.EventType, r.Topic, key, r.MessageUUID,
			nonNilBytes(r.Payload), r.Metadata, r.CreatedAt)
	}
	if len(rows) == 1 && d.insert1 != "" {
		return Query{SQL: d.insert1, Args: args}
	}
	return Query{SQL: d.eventsInsertSQL(len(rows)), Args: args}
}

// eventsInsertSQL builds the INSERT text for n rows.
func (d *PostgreSQL) eventsInsertSQL(n int) string {
	b := make([]byte, 0, 160+n*48)
	b = append(b, "INSERT INTO "...)
	b = append(b, d.tables.Events...)
	b = append(b, " ("+eventInsertColumns+") VALUES "...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		base := i * eventInsertParams
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

// nullable returns nil for "" (stored as NULL) and s otherwise.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// renderMigrations reads the numbered .sql files of dir, renders them with
// the table names and splits them into statements.
func renderMigrations(dir string, t Tables) ([]Migration, error) {
	return renderMigrationsWith(dir, t, splitStatements)
}

// renderMigrationsWith is renderMigrations with the template's data and the
// script's splitter given.
func renderMigrationsWith(dir string, data any, split func(string) []string) ([]Migration, error) {
	entries, err := fs.ReadDir(migrationsFS, dir)
	if err != nil {
		return nil, fmt.Errorf("dialects: read migrations %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var out []Migration
	for i, e := range entries {
		name := e.Name()
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil || version != i+1 {
			return nil, fmt.Errorf("dialects: migration %s/%s: want version %d in its name", dir, name, i+1)
		}
		raw, err := migrationsFS.ReadFile(path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("dialects: migration %s: %w", name, err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("dialects: migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: version, Name: name, Statements: split(buf.String())})
	}
	return out, nil
}

// errorText is an error text as every dialect binds it to last_error:
// cleaned and cut by dbtext, so that no error, whatever it holds, can make
// the statement that records an outcome fail. The relay and the poison
// queue clean it too; this keeps a caller of the seam from forgetting.
func errorText(s string) string { return dbtext.Text(s, dbtext.MaxErrorBytes) }

// Notify implements Dialect: pg_notify takes the channel as text, so it
// needs no quoting. PostgreSQL delivers the notification only if the
// transaction commits and folds identical ones of a transaction into one;
// the commit takes a global lock on the notification queue, which is why
// the publisher limits how often it notifies (docs/design.md, "Wake-up on
// commit").
func (d *PostgreSQL) Notify(channel, payload string) Query {
	return Query{SQL: "SELECT pg_notify($1, $2)", Args: []any{channel, payload}}
}
