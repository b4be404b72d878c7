package dialects

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Query is one SQL statement and its arguments.
type Query struct {
	SQL  string
	Args []any
}

// String returns the SQL text, for logs and errors.
func (q Query) String() string { return q.SQL }

// Migration is one numbered step of the schema.
type Migration struct {
	// Version numbers migrations from 1, in the order they run.
	Version int
	// Name is the file name the migration came from, e.g. "0001_init.sql".
	Name string
	// Statements run in order, each on its own, inside the migration
	// transaction.
	Statements []string
}

// Dialect builds the SQL of one database. Implementations are safe for
// concurrent use and immutable once built.
//
// Dialect is not meant to be implemented outside this module: use the
// dialects New returns (PostgreSQL, MySQL/MariaDB, Oracle). Methods may be
// added to it in minor versions.
type Dialect interface {
	// Name is "postgres", "mysql" or "oracle".
	Name() string
	// Tables returns the qualified names of the oncebox tables.
	Tables() Tables
	// EncodeID converts an event id to the argument the id column takes
	// (text for PostgreSQL's uuid, 16 bytes for BINARY(16) and RAW(16)).
	EncodeID(id oncebox.EventID) any

	Migrator
	OutboxWriter
	Relay
	Inbox
	DLQStore
	Inspector
}

// Tables holds the qualified names of the oncebox tables, ready to be
// written into SQL text. They are built from validated identifiers only.
type Tables struct {
	// Events is the outbox table, "outbox_events".
	Events string
	// DLQ is the dead letter table, "outbox_dlq_events".
	DLQ string
	// Inbox is the table of processed event ids, "inbox_events".
	Inbox string
	// Jobs is the table of the clean-up jobs' locks, "outbox_jobs".
	Jobs string
	// Migrations is the table of applied migrations, "oncebox_migrations".
	Migrations string
	// Instances is the table of the relay instances' heartbeats,
	// "outbox_instances" (migration 3).
	Instances string
	// Prefix is the table prefix alone, for index and constraint names.
	Prefix string
}

// Index returns the qualified name of the index name (given without the
// prefix): in the tables' schema, with the tables' prefix, as the
// migrations create it. A DROP INDEX needs the schema on PostgreSQL.
func (t Tables) Index(name string) string {
	if i := strings.LastIndexByte(t.Events, '.'); i >= 0 {
		return t.Events[:i+1] + t.Prefix + name
	}
	return t.Prefix + name
}

// NewTables validates cfg and returns the qualified table names.
func NewTables(cfg oncebox.TablesConfig) (Tables, error) {
	if err := cfg.Validate(); err != nil {
		return Tables{}, err
	}
	q := func(name string) string {
		name = cfg.Prefix + name
		if cfg.Schema != "" {
			return cfg.Schema + "." + name
		}
		return name
	}
	return Tables{
		Events:     q("outbox_events"),
		DLQ:        q("outbox_dlq_events"),
		Inbox:      q("inbox_events"),
		Jobs:       q("outbox_jobs"),
		Migrations: q("oncebox_migrations"),
		Instances:  q("outbox_instances"),
		Prefix:     cfg.Prefix,
	}, nil
}

// EventRow is one row to insert into the outbox table. Status is PENDING and
// next_retry_at is CreatedAt; the dialect writes both.
type EventRow struct {
	ID          oncebox.EventID
	EventType   string
	Topic       string
	Key         string // "" stores NULL
	MessageUUID string
	Payload     []byte
	Metadata    string // a JSON object of string values
	CreatedAt   time.Time
	// NextRetryAt is when the row is first due: a delayed event's requested
	// time (docs/delay.md). The zero value means CreatedAt.
	NextRetryAt time.Time
}

// NotifyChannel returns the PostgreSQL notification channel of the tables t:
// "oncebox_", the qualified outbox table name in lower case with dots as
// underscores, cut to 38 bytes, "_" and a 64-bit FNV-1a hash of that full
// name in hex: at most 63 bytes (PostgreSQL's identifier limit), a plain
// identifier, and distinct for two services whose tables differ by schema
// or prefix, so that they do not wake each other's relays. Unquoted table
// names fold to lower case in PostgreSQL, so "Shop.outbox_events" and
// "shop.outbox_events" are the same tables and get the same channel.
func NotifyChannel(t Tables) string {
	name := strings.ToLower(t.Events)
	h := fnv.New64a()
	h.Write([]byte(name))
	readable := strings.ReplaceAll(name, ".", "_")
	if len(readable) > 38 {
		readable = readable[:38]
	}
	return fmt.Sprintf("oncebox_%s_%016x", readable, h.Sum64())
}

// Database describes one supported database to the registry (package
// dialects/registry, the one list of them): its names, its dialect's
// constructor, how its drivers and URLs are recognised, and its own
// transient errors. Each database package exports one, named Database.
type Database struct {
	// Name is the canonical name, as the configuration's `database:` and
	// the CLI's --database take it, and as Dialect.Name returns it.
	Name string
	// Aliases are other names accepted for it ("mariadb" for "mysql").
	Aliases []string
	// New returns the dialect for the tables placed by cfg.
	New func(cfg oncebox.TablesConfig) (Dialect, error)
	// DriverPackages are (parts of) the import paths of the database/sql
	// drivers that speak to it, matched against the package of a handle's
	// driver type ("jackc/pgx", "go-sql-driver/mysql").
	DriverPackages []string
	// URLSchemes are the DSN URL schemes that name it ("mysql", "mariadb").
	URLSchemes []string
	// IsTransient reports the database's own "try later" errors (a
	// deadlock victim, a server shutting down); nil for none.
	IsTransient func(err error) bool
	// TestSchema reports whether oncetest.NewSchema can give a test a
	// schema of its own on this database (a database on MySQL, a schema on
	// PostgreSQL; Oracle's schemas are users, which it does not create):
	// whether the dialect's Migrator.CreateTestSchema works.
	TestSchema bool
	// Placeholder returns how the database writes the n-th bind parameter
	// of a statement, counting from 1 ($n, ? or :n), for tests and tools
	// that write statements of their own (the conformance suite, the
	// benchmark). oncebox's own statements are its dialect's.
	Placeholder func(n int) string
}
