package dialects

import (
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/watermill-oncebox"
)

// The DLQ store's and the DLQ jobs' operations. They are part of Dialect;
// this file holds their parameter and result types.

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

// dlqColumns is the select list of DLQGet, in the order of
// DLQRecord.ScanTargets.
const dlqColumns = "id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, " +
	"payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, " +
	"moved_at, updated_at"

// dlqListColumns is the select list of DLQList, in the order of
// DLQRecord.ListScanTargets: dlqColumns with the payload replaced by
// payload (an expression cutting it to DLQListPayloadBytes) and the full
// size, size, appended.
func dlqListColumns(payload, size string) string {
	if payload != "payload" {
		payload += " AS payload"
	}
	return strings.Replace(dlqColumns, "payload,", payload+",", 1) + ", " + size + " AS payload_size"
}

// dlqListCap is DLQListPayloadBytes in SQL.
var dlqListCap = strconv.Itoa(DLQListPayloadBytes)
