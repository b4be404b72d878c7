package dialects

import (
	"time"

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

// DLQStore is what the DLQ store (package dlq) asks of the dialect.
type DLQStore interface {
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
}
