package mysql

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// mysqlMaxBindParams is the most placeholders one prepared statement may
// carry on MySQL and MariaDB (the protocol counts them in 16 bits).
const mysqlMaxBindParams = 65535

// mysqlMaxIDsPerStatement bounds the ids of one IN (…) list the run methods
// write, leaving room for the statement's other parameters.
const mysqlMaxIDsPerStatement = 10_000

// MySQL is the dialect of MySQL 8.0.1+ and MariaDB 10.6+, the versions with
// FOR UPDATE SKIP LOCKED (tested on MariaDB 10.11). The DSN of
// go-sql-driver/mysql must set parseTime=true and loc=UTC: times are
// DATETIME(6) columns holding UTC. See docs/mysql.md.
type Dialect struct {
	schema   string
	tables   dialects.Tables
	lockName string
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

// New returns the MySQL/MariaDB dialect for the tables placed by cfg.
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
	d := &Dialect{schema: cfg.Schema, tables: t, lockName: name}
	d.dlqStoreRunner = sqlkit.DLQStore{S: d.dlqStatements()}
	// No NotifyStatements: MySQL and MariaDB have no notification on
	// commit, so the relay polls only.
	d.outboxRunner = sqlkit.Outbox{S: sqlkit.OutboxStatements{Insert: d.eventsInsert, MaxRows: d.maxRowsPerInsert(), ReleaseSavepoint: true}}
	d.inboxRunner = sqlkit.Inbox{
		S: sqlkit.InboxStatements{Insert: d.inboxInsert, DeleteBefore: d.inboxDeleteBefore,
			PoisonUpsert: d.dlqUpsertConsumer, PoisonPayload: d.dlqConsumerPayload},
		Single:    relayTx.Exec,
		TxOptions: sqlkit.ReadCommitted,
	}
	d.relayRunner = sqlkit.Relay{Single: relayTx.Exec, S: sqlkit.RelayStatements{
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
func (d *Dialect) Name() string { return "mysql" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// EncodeID implements Dialect: the 16 bytes of the UUIDv7, so that the
// BINARY(16) primary key keeps time order.
func (d *Dialect) EncodeID(id oncebox.EventID) any {
	b := make([]byte, 16)
	copy(b, id[:])
	return b
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

// Database is MySQL and MariaDB as the registry lists them.
var Database = dialects.Database{
	Name:           "mysql",
	Aliases:        []string{"mariadb"},
	New:            func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	DriverPackages: []string{"go-sql-driver/mysql"},
	URLSchemes:     []string{"mysql", "mariadb"},
	IsTransient:    IsTransient,
	TestSchema:     true,
	Placeholder:    style{}.Placeholder,
}
