package dialects

import (
	"time"

	"github.com/oncebox/watermill-oncebox"
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

// DLQRecord is one DLQ row as read by DLQGet and DLQList. Scan it with
// DLQRecord.ScanTargets (DLQGet) or ListScanTargets (DLQList).
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
	// (whose Payload is cut to DLQListPayloadBytes).
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

// DLQListPayloadBytes is the most payload bytes a row of DLQList carries: a
// listing is built in memory, and a page of 1,000 rows of megabyte payloads
// would be a gigabyte. DLQGet reads the whole payload.
const DLQListPayloadBytes = 4096
