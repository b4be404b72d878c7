// Package sqlite is oncebox's dialect of SQLite 3.35 and later (RETURNING,
// ON CONFLICT, UPDATE … FROM), through database/sql. It links no driver:
// the one tested is modernc.org/sqlite (pure Go, driver name "sqlite"),
// whose DSN must carry the parameters of docs/sqlite.md
// (_txlock=immediate, a busy timeout, WAL, and the integer time format).
//
// SQLite has one writer at a time: a claim's "lock" is its write
// transaction, so there is no SKIP LOCKED and none is needed. Several
// relays on one file (several processes, or several pools) are correct,
// serialized by that lock. Times are INTEGER unix microseconds, UTC, in
// every time column (docs/sqlite.md, "Column types").
package sqlite

import (
	"fmt"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// sqliteMaxBindParams is SQLite's default limit on the parameters of one
// statement (SQLITE_MAX_VARIABLE_NUMBER, 32,766 since 3.32).
const sqliteMaxBindParams = 32766

// maxIDsPerStatement is the most ids one statement binds in an IN list,
// well under sqliteMaxBindParams with the statement's other parameters.
const maxIDsPerStatement = 10000

// Dialect is the dialect of SQLite 3.35 and later (tested on 3.54 through
// modernc.org/sqlite v1.62.0).
type Dialect struct {
	tables  dialects.Tables
	insert1 string
	// deleteConfirmed: MarkProcessed deletes (DeleteConfirmed).
	deleteConfirmed bool

	// The runners of the roles (dialects/internal/sqlkit), each with this
	// database's statement builders, set by New. Embedded under unexported
	// names: their methods are the dialect's, their builders stay here.
	outboxRunner
	inboxRunner
	relayRunner
	dlqStoreRunner
	migratorRunner
	inspectorRunner
	consoleRunner
}

var _ dialects.Dialect = (*Dialect)(nil)

// New returns the SQLite dialect for the tables placed by cfg. A schema
// is the name of an attached database ("main" is the file opened); the
// error names the schema or prefix when it is not a plain identifier.
func New(cfg oncebox.TablesConfig) (*Dialect, error) {
	t, err := dialects.NewTables(cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	d := &Dialect{tables: t}
	d.insert1 = d.eventsInsertSQL(1)
	d.dlqStoreRunner = sqlkit.DLQStore{S: d.dlqStatements()}
	d.outboxRunner = sqlkit.Outbox{
		S: sqlkit.OutboxStatements{Insert: d.eventsInsert, MaxRows: d.maxRowsPerInsert(), ReleaseSavepoint: true},
	}
	d.inboxRunner = sqlkit.Inbox{
		S: sqlkit.InboxStatements{Insert: d.inboxInsert, DeleteBefore: d.inboxDeleteBefore,
			PoisonUpsert: d.dlqUpsertConsumer, PoisonPayload: d.dlqConsumerPayload},
		Single: sqlkit.Autocommit,
		// No isolation level: SQLite's transactions are serializable, and
		// database/sql drivers refuse a level they do not have.
		TxOptions: nil,
	}
	d.relayRunner = sqlkit.Relay{Single: sqlkit.Autocommit, S: sqlkit.RelayStatements{
		DueTypes:              d.eventsDueTypes,
		MarkFailed:            d.eventsMarkFailed,
		Release:               d.eventsRelease,
		DeleteProcessed:       d.eventsDeleteProcessed,
		LeaseRelease:          d.leaseRelease,
		DLQDeleteResolved:     d.dlqDeleteResolved,
		InstanceHeartbeat:     d.instanceHeartbeat,
		InstanceEnd:           d.instanceEnd,
		InstancesDeleteBefore: d.instancesDeleteBefore,
	}}
	d.migratorRunner, d.inspectorRunner, d.consoleRunner = d.migrator(), d.inspector(), d.console()
	return d, nil
}

// Name implements Dialect.
func (d *Dialect) Name() string { return "sqlite" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// EncodeID implements Dialect: the 16 bytes of the id, stored in a BLOB
// column (memcmp order is the ids' order, UUIDv7's time order).
func (d *Dialect) EncodeID(id oncebox.EventID) any { return id[:] }

// ids returns the encoded ids, as IN-list arguments.
func (d *Dialect) ids(ids []oncebox.EventID) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = d.EncodeID(id)
	}
	return out
}

// The runners' types, under the names the struct embeds them by.
type (
	outboxRunner    = sqlkit.Outbox
	inboxRunner     = sqlkit.Inbox
	relayRunner     = sqlkit.Relay
	dlqStoreRunner  = sqlkit.DLQStore
	migratorRunner  = sqlkit.Migrator
	inspectorRunner = sqlkit.Inspector
	consoleRunner   = sqlkit.Console
)

// Database is SQLite as the registry lists it. Its URL scheme is
// "sqlite": sqlite:///path/file.db stands for the file /path/file.db (the
// DSN the driver takes is then "file:/path/file.db?" plus the parameters
// of docs/sqlite.md).
var Database = dialects.Database{
	Name:    "sqlite",
	Aliases: []string{"sqlite3"},
	New:     func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	// The one driver tested, and the one whose DSN reads the INTEGER
	// times back as times (_inttotime, _time_integer_format).
	DriverPackages: []string{"modernc.org/sqlite"},
	URLSchemes:     []string{"sqlite", "sqlite3"},
	IsTransient:    IsTransient,
	TestSchema:     false,
	Placeholder:    style{}.Placeholder,
}
