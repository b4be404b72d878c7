package dialects

import (
	"time"

	"github.com/oncebox/watermill-oncebox"
)

// The relay's operations. They are part of Dialect; this file holds their
// parameter and result types.

// ClaimParams are the parameters of a claim.
type ClaimParams struct {
	// EventType is the type whose rows are claimed.
	EventType string
	// Limit is the batch size.
	Limit int
	// Token identifies this claim; finalizes must match it.
	Token oncebox.EventID
	// Now is the claim time: rows whose next_retry_at is after it wait.
	Now time.Time
}

// ClaimedEvent is a row returned by a claim, with what the relay needs to
// rebuild the message. Scan it with ClaimedEvent.ScanTargets.
type ClaimedEvent struct {
	ID            oncebox.EventID
	Topic         string
	Key           *string
	MessageUUID   string
	Payload       []byte
	Metadata      []byte
	RetryCount    int
	NextRetryAt   time.Time
	FirstFailedAt *time.Time
}

// ScanTargets returns the destinations of a row of the claim's result, in the
// order of the claim's RETURNING list.
func (e *ClaimedEvent) ScanTargets() []any {
	return []any{&e.ID, &e.Topic, &e.Key, &e.MessageUUID, &e.Payload, &e.Metadata, &e.RetryCount, &e.NextRetryAt, &e.FirstFailedAt}
}

// FailedEvent is the new state of a row whose send failed: back to PENDING
// with NextRetryAt, or FAILED when its retries are exhausted.
type FailedEvent struct {
	ID          oncebox.EventID
	Status      oncebox.Status
	RetryCount  int
	NextRetryAt time.Time
	Error       string
}

// Lease is the state of one job lock in the jobs table.
type Lease struct {
	// Name is the job, e.g. "outbox-clean-up".
	Name string
	// Owner identifies the instance holding the lease.
	Owner string
	// LockedAt is when the lease was taken; it identifies the lease together
	// with Owner.
	LockedAt time.Time
	// Until is when the lease ends unless released earlier.
	Until time.Time
}

// DLQRow is a consumed message whose handler failed, stored by the poison
// middleware (source = consumer).
type DLQRow struct {
	// ID is the DLQ row's own id (a new UUIDv7).
	ID oncebox.EventID
	// EventID is the oncebox event id of the message, nil when it had none
	// usable; rows are then unique by MessageUUID.
	EventID     *oncebox.EventID
	HandlerName string
	EventType   string
	Topic       string
	Key         string
	MessageUUID string
	Payload     []byte
	Metadata    string // a JSON object of string values
	Error       string
	// FailedAt is the time of this failure: first_failed_at of a new row,
	// last_failed_at always.
	FailedAt time.Time
}
