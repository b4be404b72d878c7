package dialects

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
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
	// Features tells how this database spells the constructs that differ.
	Features() Features
	// Tables returns the qualified names of the oncebox tables.
	Tables() Tables
	// EncodeID converts an event id to the argument the id column takes
	// (text for PostgreSQL's uuid, 16 bytes for BINARY(16) and RAW(16)).
	EncodeID(id oncebox.EventID) any

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

	// EventsDueTypes selects, in order, up to limit distinct event types
	// greater than after (the whole range when after is "") that have a
	// PENDING row, with two columns: the type, and 1 when one of its PENDING
	// rows is due at now, else 0. It is the relay's discovery of types nobody
	// configured, which pages through the types with after. It probes the
	// claim index once or twice per type (a loose index scan: the first
	// entry of each type, then its earliest next_retry_at), so its cost
	// grows with the number of types that have PENDING rows, never with the
	// number of rows: rows waiting for a retry are not read.
	EventsDueTypes(now time.Time, after string, limit int) Query
	// EventsInsert inserts rows into the outbox table in one statement. The
	// caller keeps len(rows) at most MaxRowsPerInsert().
	EventsInsert(rows []EventRow) Query
	// MaxRowsPerInsert is the most rows EventsInsert can take in one
	// statement, bounded by the database's limit on bind parameters.
	MaxRowsPerInsert() int
	// EventsList selects every row of the outbox table in id order
	// (publish order within a process), whatever its status, columns in
	// the order of StoredEvent.ScanTargets. It scans the whole table: for
	// tests (package oncetest) and tools, not for the relay.
	EventsList() Query

	// Claim locks up to p.Limit due PENDING rows of p.EventType that no other
	// claimer holds, flips them to IN_PROCESS with p.Token and returns them,
	// committed before it returns: one statement on PostgreSQL, a
	// select-for-update-skip-locked then an update in one READ COMMITTED
	// transaction on MySQL and Oracle.
	Claim(ctx context.Context, db wsql.Beginner, p ClaimParams) ([]ClaimedEvent, error)
	// MarkProcessed marks ids PROCESSED where the claim token matches and
	// returns the ids it marked.
	MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error)
	// Exec runs one of the relay's single statements (EventsMarkFailed,
	// EventsRelease, EventsRecover, EventsDeleteProcessed, DLQDeleteResolved,
	// InboxDeleteBefore) in its own transaction at the relay's isolation
	// level (READ COMMITTED on MySQL whatever the server's default) and
	// returns the rows it affected.
	Exec(ctx context.Context, db wsql.Beginner, q Query) (int64, error)
	// Backlog counts the outbox rows by event type and status with the
	// oldest created_at of each group, and the DLQ rows by source and status
	// (oldest NULL): columns kind ('outbox' or 'dlq'), key, status, count,
	// oldest.
	Backlog() Query

	// EventsMarkFailed writes each row's new state after a failed send where
	// the claim token matches.
	EventsMarkFailed(token oncebox.EventID, rows []FailedEvent, now time.Time) Query
	// EventsRelease returns ids to PENDING, where the token matches, without
	// counting an attempt.
	EventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) Query
	// EventsRecover returns up to limit rows IN_PROCESS since before cutoff
	// to PENDING without counting an attempt.
	EventsRecover(cutoff, now time.Time, limit int) Query
	// MoveToDLQ moves up to limit FAILED rows to the DLQ table atomically
	// and returns how many it moved.
	MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error)
	// EventsDeleteProcessed deletes up to limit PROCESSED rows updated
	// before cutoff.
	EventsDeleteProcessed(cutoff time.Time, limit int) Query
	// AcquireLease takes the job lease l unless a live lease is held, and
	// reports whether it took it.
	AcquireLease(ctx context.Context, db wsql.ContextExecutor, l Lease) (bool, error)
	// LeaseRelease ends the lease l.Owner took at l.LockedAt at l.Until.
	LeaseRelease(l Lease) Query

	// InboxInsert records one id for consumer unless present; one affected
	// row means new.
	InboxInsert(consumer, id string, now time.Time) Query
	// InboxRecordMany records ids for consumer in the caller's transaction tx
	// and returns those that were new. ids holds no repeats. An id a
	// concurrent transaction inserted first is not new.
	InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error)
	// InboxDeleteBefore deletes up to limit ids processed before cutoff.
	InboxDeleteBefore(cutoff time.Time, limit int) Query
	// DLQUpsertConsumer stores a poison message, or counts one more attempt
	// on the row the same message and handler already have.
	DLQUpsertConsumer(r DLQRow) Query
	// DLQConsumerPayload selects the payload (one binary column) of the
	// consumer-side row of eventID and handler, which DLQUpsertConsumer
	// would count one more attempt on; no row when there is none. The
	// poison queue reads it to tell a redelivery from another message that
	// carries the same event id.
	DLQConsumerPayload(eventID oncebox.EventID, handler string) Query

	// DLQGet selects one DLQ row by id, columns in the order of
	// DLQRecord.ScanTargets; no row when it does not exist.
	DLQGet(id oncebox.EventID) Query
	// DLQGetStatus selects the status of one DLQ row, one text column; no
	// row when it does not exist.
	DLQGetStatus(id oncebox.EventID) Query
	// DLQList selects up to limit rows matching f in (moved_at, id) order,
	// after the key when it is not nil, columns in the order of
	// DLQRecord.ListScanTargets: the payload cut to DLQListPayloadBytes
	// (where the database can), then its full size.
	DLQList(f DLQFilter, after *DLQKey, limit int) Query
	// DLQCount counts the rows matching f, one integer.
	DLQCount(f DLQFilter) Query
	// DLQSetStatus sets row id to status to if its status is one of from;
	// one affected row means changed.
	DLQSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) Query
	// DLQSetStatusMany sets the rows of ids whose status is one of from to
	// status to; the affected count is the rows changed. The caller keeps
	// len(ids) within Features.MaxInList when it is set.
	DLQSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) Query
	// DLQSetStatusWhere sets the rows matching f whose status is one of from
	// to status to; the affected count is the rows changed.
	DLQSetStatusWhere(f DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) Query
	// DLQDelete deletes row id unless it is IN_PROCESS; one affected row
	// means deleted.
	DLQDelete(id oncebox.EventID) Query
	// DLQDeleteMany deletes the rows of ids that are not IN_PROCESS; the
	// affected count is the rows deleted.
	DLQDeleteMany(ids []oncebox.EventID) Query
	// DLQDeleteWhere deletes the rows matching f that are not IN_PROCESS;
	// the affected count is the rows deleted.
	DLQDeleteWhere(f DLQFilter) Query
	// TransferDLQToOutbox moves up to limit TO_RETRY rows back to the outbox
	// (PENDING, retry_count 0, due now; an event id already there is
	// re-armed) and removes them from the DLQ atomically, and returns the
	// number of DLQ rows moved.
	TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error)
	// DLQDeleteResolved deletes up to limit RESOLVED rows last updated
	// before cutoff.
	DLQDeleteResolved(cutoff time.Time, limit int) Query

	// Notify builds the statement that, run in a transaction, wakes the
	// relays listening on channel with payload once the transaction commits
	// (PostgreSQL's pg_notify; see NotifyChannel). A zero Query (empty SQL)
	// means the database cannot: MySQL/MariaDB and Oracle relays poll only.
	Notify(channel, payload string) Query

	// Heartbeats and the recovery of a dead instance's claims (migration
	// 3; see docs/design.md, "Recovery").

	// InstanceHeartbeat records that instance is alive at at: its row in
	// the instances table, inserted or updated.
	InstanceHeartbeat(instance string, at time.Time) Query
	// InstanceEnd deletes the heartbeat row of instance (at Close).
	InstanceEnd(instance string) Query
	// InstancesDeleteBefore deletes the heartbeat rows older than cutoff:
	// instances gone without Close.
	InstancesDeleteBefore(cutoff time.Time) Query
	// EventsRecoverStale returns up to p.Limit IN_PROCESS rows to PENDING
	// without counting an attempt: those claimed before p.ClaimedBefore
	// (max-batch-processing-time, whoever holds them), and those claimed
	// before p.StaleBefore by an instance whose heartbeat is older than
	// p.StaleBefore or missing. Claims without claimed_by (taken before
	// migration 3) only go by the first bound.
	EventsRecoverStale(p RecoverParams) Query
	// RecoverStale runs EventsRecoverStale and reports the rows it
	// recovered, whether any row was IN_PROCESS (someone's claim is in
	// flight, so the caller keeps watching) and the database's clock, in
	// UTC, read by the first statement (for the relay's clock check,
	// docs/design.md, "Clocks"): one statement on PostgreSQL; on MySQL and
	// Oracle a plain-read probe, then the update only when a row is
	// IN_PROCESS.
	RecoverStale(ctx context.Context, db wsql.Beginner, p RecoverParams) (recovered int, inProcess bool, dbNow time.Time, err error)

	// DatabaseNow reads the database's current time, in UTC, as one row
	// of one column (see DatabaseTime).
	DatabaseNow() Query
	// DatabaseTime reads the database's current time with DatabaseNow, in
	// UTC.
	DatabaseTime(ctx context.Context, db wsql.ContextExecutor) (time.Time, error)
	// CheckSchema tells whether db can serve the dialect's tables: the
	// database answers, every migration has been applied, and a timestamp
	// reads back as a time (MySQL's DSN needs parseTime=true). The relay
	// runs it when it starts, so that a relay whose database cannot work
	// returns an error from Run instead of logging the same failure forever.
	CheckSchema(ctx context.Context, db wsql.ContextExecutor) error
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
}

// Features describes the SQL forms of a database.
type Features struct {
	// Placeholder is the bind parameter style.
	Placeholder PlaceholderStyle
	// Returning reports whether INSERT/UPDATE … RETURNING exists, so that a
	// claim can flip and read rows in one statement.
	Returning bool
	// SkipLocked is how the claim locks rows without waiting on neighbours.
	SkipLocked SkipLockedForm
	// IDType is the column type of event ids: "uuid", "BINARY(16)", "RAW(16)".
	IDType string
	// InsertIgnore is the insert-or-ignore form of the inbox.
	InsertIgnore InsertIgnoreForm
	// MaxInList is the most values one IN (…) list may hold; 0 for no limit
	// beyond MaxBindParams. Oracle: 1,000.
	MaxInList int
	// MaxBindParams is the most bind parameters one statement may carry.
	MaxBindParams int
	// ReadCommittedTx are the options that begin a READ COMMITTED
	// transaction: an explicit level, or nil on Oracle, where it is the
	// default and go-ora (v2.8.24) refuses an explicit one.
	ReadCommittedTx *sql.TxOptions
}

// PlaceholderStyle is how bind parameters are written.
type PlaceholderStyle int

const (
	// PlaceholderDollar is $1, $2, … (PostgreSQL).
	PlaceholderDollar PlaceholderStyle = iota + 1
	// PlaceholderQuestion is ?, ?, … (MySQL).
	PlaceholderQuestion
	// PlaceholderColon is :1, :2, … (Oracle).
	PlaceholderColon
)

// Format returns the placeholder of the n-th parameter, counting from 1.
func (s PlaceholderStyle) Format(n int) string {
	switch s {
	case PlaceholderDollar:
		return "$" + strconv.Itoa(n)
	case PlaceholderColon:
		return ":" + strconv.Itoa(n)
	case PlaceholderQuestion:
		return "?"
	}
	panic(fmt.Sprintf("dialects: unknown placeholder style %d", int(s)))
}

// SkipLockedForm is how a claim takes rows other claimers do not hold.
type SkipLockedForm int

const (
	// SkipLockedCTE: one statement, UPDATE … FROM (SELECT … FOR UPDATE SKIP
	// LOCKED) … RETURNING (PostgreSQL).
	SkipLockedCTE SkipLockedForm = iota + 1
	// SkipLockedSelectThenUpdate: SELECT … FOR UPDATE SKIP LOCKED, then UPDATE
	// … WHERE id IN (…), in one transaction (MySQL 8, MariaDB ≥ 10.6).
	SkipLockedSelectThenUpdate
	// SkipLockedRowidCursor: lock through a ROWID subquery with FOR UPDATE
	// SKIP LOCKED fetched in a cursor, never FETCH FIRST or ROWNUM, which
	// filter before locking (Oracle).
	SkipLockedRowidCursor
)

// InsertIgnoreForm is how a row is inserted unless its key exists.
type InsertIgnoreForm int

const (
	// InsertOnConflictDoNothing: INSERT … ON CONFLICT DO NOTHING RETURNING
	// (PostgreSQL): the returned rows are the new ones.
	InsertOnConflictDoNothing InsertIgnoreForm = iota + 1
	// InsertIgnore: INSERT IGNORE (MySQL); new rows are found by affected
	// counts, or by a read-back for batches.
	InsertIgnore
	// InsertMerge: MERGE … WHEN NOT MATCHED THEN INSERT (Oracle).
	InsertMerge
)

// NotifyQueueUsageSQL reads how full PostgreSQL's notification queue is (0
// to 1). The queue is the cluster's, shared by every database and channel;
// it drains only as fast as its slowest listener reads, and a listener that
// sits in an open transaction reads nothing: once it is full, every
// transaction that ran NOTIFY fails at COMMIT (docs/design.md, "Wake-up on
// commit"). The publisher reads it before it notifies, the relay's listener
// on its own connection.
const NotifyQueueUsageSQL = "SELECT pg_notification_queue_usage()"

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
	// PostgreSQL; Oracle's schemas are users, which it does not create).
	TestSchema bool
}
