package postgres

import (
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// postgresMaxBindParams is PostgreSQL's limit on parameters per statement
// (the wire protocol counts them in an int16).
const postgresMaxBindParams = 65535

// PostgreSQL is the dialect of PostgreSQL 12 and later (tested on 15).
type Dialect struct {
	schema string
	tables dialects.Tables
	// partitions, when on, adds the conversion step to Migrations
	// (partition.go, WithPartitions).
	partitions oncebox.PartitionsConfig
	// deleteConfirmed: MarkProcessed deletes (DeleteConfirmed).
	deleteConfirmed bool
	lockKey         int64
	insert1         string

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

// New returns the PostgreSQL dialect for the tables placed by cfg.
// The error names the schema or prefix when it is not a plain identifier.
func New(cfg oncebox.TablesConfig) (*Dialect, error) {
	t, err := dialects.NewTables(cfg)
	if err != nil {
		return nil, err
	}
	d := &Dialect{schema: cfg.Schema, tables: t, lockKey: sqlkit.AdvisoryKey(t.Migrations)}
	d.insert1 = d.eventsInsertSQL(1)
	d.dlqStoreRunner = sqlkit.DLQStore{S: d.dlqStatements()}
	d.outboxRunner = sqlkit.Outbox{
		S: sqlkit.OutboxStatements{Insert: d.eventsInsert, MaxRows: d.maxRowsPerInsert(), ReleaseSavepoint: true},
		N: &sqlkit.NotifyStatements{Notify: d.notify, QueueUsage: d.notifyQueueUsage, Listen: d.listen},
	}
	d.inboxRunner = sqlkit.Inbox{
		S: sqlkit.InboxStatements{Insert: d.inboxInsert, DeleteBefore: d.inboxDeleteBefore,
			PoisonUpsert: d.dlqUpsertConsumer, PoisonPayload: d.dlqConsumerPayload},
		Single:    sqlkit.Autocommit,
		TxOptions: sqlkit.ReadCommitted,
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
	d.migratorRunner, d.inspectorRunner = d.migrator(), d.inspector()
	return d, nil
}

// Name implements Dialect.
func (d *Dialect) Name() string { return "postgres" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// EncodeID implements Dialect: the canonical text form, which both pgx and
// database/sql drivers send as a uuid.
func (d *Dialect) EncodeID(id oncebox.EventID) any { return id.String() }

// The runners' types, under the names the struct embeds them by.
type (
	outboxRunner    = sqlkit.Outbox
	inboxRunner     = sqlkit.Inbox
	relayRunner     = sqlkit.Relay
	dlqStoreRunner  = sqlkit.DLQStore
	migratorRunner  = sqlkit.Migrator
	inspectorRunner = sqlkit.Inspector
)

// Database is PostgreSQL as the registry lists it.
var Database = dialects.Database{
	Name:           "postgres",
	New:            func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	DriverPackages: []string{"jackc/pgx", "lib/pq"},
	URLSchemes:     []string{"postgres", "postgresql"},
	IsTransient:    IsTransient,
	TestSchema:     true,
	Placeholder:    style{}.Placeholder,
}
