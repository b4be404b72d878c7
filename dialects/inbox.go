package dialects

import (
	"context"
	"database/sql"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Inbox is what the inbox, its cleaner and the poison queue (package
// middleware) and the batch subscriber ask of the dialect.
type Inbox interface {
	// InboxRecord records id for consumer through tx (the handler's
	// transaction, or the pool for an at-most-once inbox) unless it is
	// present, and reports whether it was new. A concurrent insert of the
	// same (consumer, id) by an uncommitted transaction makes it wait until
	// that transaction ends; then it records the id (the other rolled
	// back) or reports it not new (the other committed), except on Oracle,
	// where it then fails with ORA-00001 (the message is redelivered and
	// the id found then).
	InboxRecord(ctx context.Context, tx wsql.ContextExecutor, consumer, id string, now time.Time) (bool, error)
	// InboxRecordMany records ids for consumer in the caller's transaction tx
	// and returns those that were new. ids holds no repeats. An id a
	// concurrent transaction inserted first is not new.
	InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error)
	// InboxDeleteBefore deletes up to limit ids processed before cutoff, in
	// a transaction of its own on db at the relay's isolation (READ
	// COMMITTED on MySQL whatever the server's default), and returns how
	// many it deleted.
	InboxDeleteBefore(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error)
	// InboxTxOptions are the options that begin the inbox's transactions:
	// READ COMMITTED, or nil on Oracle, where it is the default isolation
	// and go-ora (v2.8.24) refuses an explicit one.
	InboxTxOptions() *sql.TxOptions
	// PoisonUpsert stores a poison message through db as a consumer-side
	// DLQ row, or, when the same message failed the same handler before (a
	// crash between storing and acking, or a redelivery), counts one more
	// attempt on the row it already has.
	PoisonUpsert(ctx context.Context, db wsql.ContextExecutor, r DLQRow) error
	// PoisonPayload reads through db the payload of the consumer-side row
	// of eventID and handler, which PoisonUpsert would count one more
	// attempt on; found is false when there is none. The poison queue
	// reads it to tell a redelivery from another message that carries the
	// same event id.
	PoisonPayload(ctx context.Context, db wsql.ContextExecutor, eventID oncebox.EventID, handler string) (payload []byte, found bool, err error)
}
