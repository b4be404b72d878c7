package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// DLQFilter selects DLQ rows. Zero fields do not filter. The dlq package
// validates it before a dialect sees it.
type DLQFilter struct {
	// Statuses keeps rows in any of these statuses.
	Statuses []oncebox.DLQStatus
	// EventType keeps rows of this event type.
	EventType string
	// Source keeps rows of this side.
	Source oncebox.DLQSource
	// MovedFrom keeps rows moved at or after it.
	MovedFrom time.Time
	// MovedTo keeps rows moved before it.
	MovedTo time.Time
}

// DLQKey is a position in the (moved_at, id) order of DLQ rows: a listing
// after it starts with the next row.
type DLQKey struct {
	MovedAt time.Time
	ID      oncebox.EventID
}

// DLQRecord is one DLQ row as read by DLQGet and DLQList. The dialects scan
// it with DLQRecord.ScanTargets (DLQGet) or ListScanTargets (DLQList).
type DLQRecord struct {
	ID            oncebox.EventID
	EventID       *oncebox.EventID
	Source        string
	HandlerName   string
	EventType     string
	Topic         string
	Key           *string
	MessageUUID   string
	Payload       []byte
	Metadata      []byte // a JSON object of string values
	Status        string
	RetryCount    int
	LastError     *string
	CreatedAt     time.Time
	FirstFailedAt *time.Time
	LastFailedAt  *time.Time
	MovedAt       time.Time
	UpdatedAt     time.Time
	// PayloadSize is the payload's full size in bytes, read by DLQList
	// (whose Payload is cut to DLQListPayloadBytes); 0 from DLQGet.
	PayloadSize int64
}

// ScanTargets returns the destinations of a row of DLQGet, in the order of
// its select list.
func (r *DLQRecord) ScanTargets() []any {
	return []any{&r.ID, &r.EventID, &r.Source, &r.HandlerName, &r.EventType, &r.Topic, &r.Key,
		&r.MessageUUID, &r.Payload, &r.Metadata, &r.Status, &r.RetryCount, &r.LastError, &r.CreatedAt,
		&r.FirstFailedAt, &r.LastFailedAt, &r.MovedAt, &r.UpdatedAt}
}

// ListScanTargets returns the destinations of a row of DLQList: those of
// ScanTargets, then PayloadSize.
func (r *DLQRecord) ListScanTargets() []any {
	return append(r.ScanTargets(), &r.PayloadSize)
}

// DLQRetryWakePayload is the payload of the notification a DLQ retry sends
// on the tables' channel (NotifyChannel) in the transaction that sets rows
// TO_RETRY, to wake the relays' dlq-retry job: empty, which no event type
// can be (the publisher refuses an empty type), so a relay tells it from
// the wake-ups of the event types. The in-process hub (package inprocess)
// carries it alike.
const DLQRetryWakePayload = ""

// DLQListPayloadBytes is the most payload bytes a row of DLQList carries: a
// listing is built in memory, and a page of 1,000 rows of megabyte payloads
// would be a gigabyte. DLQGet reads the whole payload.
const DLQListPayloadBytes = 4096

// DLQStore is what the DLQ store (package dlq) asks of the dialect. Every
// method runs its statements on db, a pool or the caller's transaction, one
// statement each (DLQSetStatusMany and DLQDeleteMany split a list of ids
// longer than one statement takes into several, each atomic on its own).
type DLQStore interface {
	// DLQGet reads row id, its payload whole; found is false when there is
	// no such row.
	DLQGet(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (r DLQRecord, found bool, err error)
	// DLQGetStatus reads the status of row id; found is false when there is
	// no such row.
	DLQGetStatus(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (status oncebox.DLQStatus, found bool, err error)
	// DLQList reads up to limit rows matching f in (moved_at, id) order,
	// after the key when it is not nil. Each row's Payload is at most its
	// first DLQListPayloadBytes, its PayloadSize the whole payload's size.
	DLQList(ctx context.Context, db wsql.ContextExecutor, f DLQFilter, after *DLQKey, limit int) ([]DLQRecord, error)
	// DLQCount returns the number of rows matching f.
	DLQCount(ctx context.Context, db wsql.ContextExecutor, f DLQFilter) (int, error)
	// DLQSetStatus sets row id to status to if its status is one of from,
	// stamping updated_at with now; changed is false when no row was
	// changed (no such row, or in another status).
	DLQSetStatus(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) (changed bool, err error)
	// DLQSetStatusMany sets the rows of ids whose status is one of from to
	// status to and returns how many changed; no ids run no statement.
	DLQSetStatusMany(ctx context.Context, db wsql.ContextExecutor, ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) (int64, error)
	// DLQSetStatusWhere sets the rows matching f whose status is one of from
	// to status to and returns how many changed.
	DLQSetStatusWhere(ctx context.Context, db wsql.ContextExecutor, f DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) (int64, error)
	// DLQDelete deletes row id unless it is IN_PROCESS; deleted is false
	// when no row was deleted (no such row, or IN_PROCESS).
	DLQDelete(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (deleted bool, err error)
	// DLQDeleteMany deletes the rows of ids that are not IN_PROCESS and
	// returns how many it deleted; no ids run no statement.
	DLQDeleteMany(ctx context.Context, db wsql.ContextExecutor, ids []oncebox.EventID) (int64, error)
	// DLQDeleteWhere deletes the rows matching f that are not IN_PROCESS and
	// returns how many it deleted.
	DLQDeleteWhere(ctx context.Context, db wsql.ContextExecutor, f DLQFilter) (int64, error)
}
