package dialects

import (
	"context"
	"database/sql"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// Inspector reads the tables as a whole, for tools (the CLI's status, the
// backlog metrics) and tests (package oncetest); never on the relay's path.
type Inspector interface {
	// Backlog counts the outbox rows by event type and status with the
	// earliest next_retry_at of each group, and the DLQ rows by source and
	// status, in no particular order: one grouped statement over both
	// tables.
	Backlog(ctx context.Context, db wsql.ContextExecutor) ([]BacklogRow, error)
	// EventsList returns every row of the outbox table in id order
	// (publish order within a process), whatever its status. It scans the
	// whole table: for tests (package oncetest) and tools, not for the
	// relay.
	EventsList(ctx context.Context, db wsql.ContextExecutor) ([]StoredEvent, error)
}

// BacklogTable tells which table a BacklogRow counts.
type BacklogTable string

const (
	// BacklogOutbox is a group of the outbox table: Key is an event type.
	BacklogOutbox BacklogTable = "outbox"
	// BacklogDLQ is a group of the DLQ table: Key is a source ("publisher"
	// or "consumer").
	BacklogDLQ BacklogTable = "dlq"
)

// BacklogRow is one group of Inspector.Backlog.
type BacklogRow struct {
	// Table is the table the group belongs to.
	Table BacklogTable
	// Key is the event type (outbox) or the source (DLQ) of the group.
	Key string
	// Status is the rows' status.
	Status string
	// Count is the number of rows in the group.
	Count int64
	// Oldest is the earliest next_retry_at of an outbox group: for PENDING
	// rows, when the group's oldest due row came due (its created_at for
	// an event neither delayed nor retried), or a time still ahead when
	// every row waits for its delay or retry; a waiting row is not lag.
	// Never valid for a DLQ group.
	Oldest sql.NullTime
}
