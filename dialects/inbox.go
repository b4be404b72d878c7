package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Inbox is what the inbox and the poison queue (package middleware) ask of
// the dialect.
type Inbox interface {
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
}
