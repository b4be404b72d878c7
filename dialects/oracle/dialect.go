package oracle

import (
	"strconv"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// oracleMaxInList is Oracle's limit on the values of one IN (…) list
// (ORA-01795).
const oracleMaxInList = 1000

// oracleMaxBindParams is the most bind parameters the dialect puts in one
// statement (Oracle's own limit is 65,535 per statement).
const oracleMaxBindParams = 65535

// oracleEmpty stands for the empty string in the columns where "" is a
// meaningful value (handler_name, the inbox's consumer and event_id): Oracle
// stores "" as NULL, which a NOT NULL or primary-key column refuses and
// which compares equal to nothing.
const oracleEmpty = " "

// Oracle is the dialect of Oracle Database 19c and later, through the go-ora
// driver (github.com/sijms/go-ora/v2, "oracle"). Identifiers longer than 30
// bytes (a long table prefix) need 12.2 or later. It was written against the
// documentation and has not been run against a server in this repository's
// CI unless ORACLE_DSN is set: see docs/oracle.md.
type Dialect struct {
	tables   dialects.Tables
	schema   string
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
}

var _ dialects.Dialect = (*Dialect)(nil)

// New returns the Oracle dialect for the tables placed by cfg. The
// schema is an Oracle user, which must exist: the dialect never creates it.
func New(cfg oncebox.TablesConfig) (*Dialect, error) {
	t, err := dialects.NewTables(cfg)
	if err != nil {
		return nil, err
	}
	d := &Dialect{tables: t, schema: cfg.Schema, lockName: oracleLockName(t.Migrations)}
	d.dlqStoreRunner = sqlkit.DLQStore{S: d.dlqStatements()}
	// No NotifyStatements: Oracle's notifications (DBMS_ALERT, AQ) need
	// grants and objects the schema does not have, so the relay polls
	// only. No RELEASE SAVEPOINT either: a savepoint lasts until its
	// transaction ends.
	d.outboxRunner = sqlkit.Outbox{S: sqlkit.OutboxStatements{Insert: d.eventsInsert, MaxRows: d.maxRowsPerInsert()}}
	d.inboxRunner = sqlkit.Inbox{
		S: sqlkit.InboxStatements{Insert: d.inboxInsert, DeleteBefore: d.inboxDeleteBefore,
			PoisonUpsert: d.dlqUpsertConsumer, PoisonPayload: d.dlqConsumerPayload},
		Single:    oracleTx.Exec,
		TxOptions: oracleTx.Options,
	}
	d.relayRunner = sqlkit.Relay{Single: oracleTx.Exec, S: sqlkit.RelayStatements{
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
	d.migratorRunner, d.inspectorRunner = d.migrator(), d.inspector()
	return d, nil
}

// Name implements Dialect.
func (d *Dialect) Name() string { return "oracle" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// EncodeID implements Dialect: the 16 bytes, which go-ora binds as RAW. A
// UUIDv7's bytes sort in time order.
func (d *Dialect) EncodeID(id oncebox.EventID) any {
	b := make([]byte, 16)
	copy(b, id[:])
	return b
}

// oraText returns s, or oracleEmpty for "".
func oraText(s string) string {
	if s == "" {
		return oracleEmpty
	}
	return s
}

// oraTime is a time argument: always UTC, bound with SYS_EXTRACT_UTC in the
// SQL (go-ora binds a time.Time as TIMESTAMP WITH TIME ZONE; the columns are
// TIMESTAMP(6) holding UTC, so every comparison and assignment goes through
// SYS_EXTRACT_UTC and never depends on the session time zone).
func oraTime(t time.Time) time.Time { return t.UTC() }

// binder numbers bind parameters :1, :2, … in the order they are written.
// Oracle binds by position for SQL statements: a placeholder written twice
// takes two arguments, so no placeholder is ever reused; a value needed
// twice is bound twice.
type binder = sqlkit.Binder[style]

// style is Oracle's way of binding: :n placeholders, a time bound as UTC
// and read through SYS_EXTRACT_UTC, at most 1,000 values in one IN list.
type style struct{}

func (style) Placeholder(n int) string { return ":" + strconv.Itoa(n) }

func (style) Time(v time.Time, bind func(any) string) string {
	return "SYS_EXTRACT_UTC(" + bind(oraTime(v)) + ")"
}

func (style) MaxInList() int { return oracleMaxInList }

// idIn is b.In over event ids.
func idIn(b *binder, col string, ids []oncebox.EventID, d *Dialect) string {
	vals := make([]any, len(ids))
	for i, id := range ids {
		vals[i] = d.EncodeID(id)
	}
	return b.In(col, vals)
}

// The runners' types, under the names the struct embeds them by.
type (
	outboxRunner    = sqlkit.Outbox
	inboxRunner     = sqlkit.Inbox
	relayRunner     = sqlkit.Relay
	dlqStoreRunner  = sqlkit.DLQStore
	migratorRunner  = sqlkit.Migrator
	inspectorRunner = sqlkit.Inspector
)

// Database is Oracle as the registry lists it.
var Database = dialects.Database{
	Name:           "oracle",
	New:            func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	DriverPackages: []string{"sijms/go-ora", "godror"},
	URLSchemes:     []string{"oracle"},
	IsTransient:    IsTransient,
	Placeholder:    style{}.Placeholder,
}
