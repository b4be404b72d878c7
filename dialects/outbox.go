package dialects

import (
	"context"
	"fmt"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// OutboxWriter is what the publisher asks of the dialect: the insert of
// the outbox rows in the caller's transaction and the wake-up on commit;
// and what the relay's listener asks of it (PostgreSQL's LISTEN and the
// notification queue's usage, on the listener's own connection).
type OutboxWriter interface {
	// InsertEvents inserts rows into the outbox table through db, the
	// caller's transaction: in one statement, or in several, in order, when
	// rows are more than one statement of the database takes (its limit on
	// bind parameters: 7,281 rows on PostgreSQL and MySQL, 83 on Oracle).
	// A statement that inserted another number of rows than it was given
	// fails it with an *InsertCountError (a driver that cannot count the
	// rows is taken at its word).
	InsertEvents(ctx context.Context, db wsql.ContextExecutor, rows []EventRow) error
	// CanNotify reports whether the database can wake the relays on
	// commit: PostgreSQL can (pg_notify); MySQL/MariaDB and Oracle relays
	// poll only. Notify, NotifyQueueUsage and Listen need it.
	CanNotify() bool
	// Notify, run in the transaction db, wakes the relays listening on
	// channel with payload once the transaction commits (PostgreSQL's
	// pg_notify; see NotifyChannel). Where CanNotify is false it does
	// nothing and returns nil: there is no listener to wake.
	Notify(ctx context.Context, db wsql.ContextExecutor, channel, payload string) error
	// NotifyQueueUsage reads through db how full PostgreSQL's notification
	// queue is (0 to 1). The queue is the cluster's, shared by every
	// database and channel; it drains only as fast as its slowest listener
	// reads, and a listener that sits in an open transaction reads
	// nothing: once it is full, every transaction that ran NOTIFY fails at
	// COMMIT (docs/design.md, "Wake-up on commit"). The publisher reads it
	// in its transaction before it notifies, the relay's listener on its
	// own connection. Where CanNotify is false it fails with an error
	// wrapping errors.ErrUnsupported.
	NotifyQueueUsage(ctx context.Context, db wsql.ContextExecutor) (float64, error)
	// Listen makes the session of db, a connection of its own (LISTEN is
	// session state), listen on channel; the caller then waits for the
	// notifications with its driver. Where CanNotify is false it fails
	// with an error wrapping errors.ErrUnsupported.
	Listen(ctx context.Context, db wsql.ContextExecutor, channel string) error
	// Savepoint runs fn in the transaction tx under a savepoint called
	// name (a plain identifier). When fn fails, tx is rolled back to the
	// savepoint, which undoes what fn did and leaves tx usable (a failed
	// statement aborts a PostgreSQL transaction), and fn's error is
	// returned as fnErr. err is the failure of the savepoint's own
	// statements (tx is then unusable), or of a name that is not a plain
	// identifier; fn does not run when the savepoint could not be set.
	Savepoint(ctx context.Context, tx wsql.ContextExecutor, name string, fn func() error) (fnErr, err error)
}

// InsertCountError is the error of InsertEvents when a statement inserted
// another number of rows than it was given.
type InsertCountError struct {
	// Inserted is the number of rows the statement inserted.
	Inserted int64
	// Want is the number of rows it was given.
	Want int64
}

// Error says both counts.
func (e *InsertCountError) Error() string {
	return fmt.Sprintf("inserted %d rows, want %d", e.Inserted, e.Want)
}
