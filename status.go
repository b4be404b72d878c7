package oncebox

// Status is the state of a row of the outbox table. The life of an event:
//
//	PENDING ──claim──▶ IN_PROCESS ──confirmed──▶ PROCESSED ──ttl──▶ deleted
//	   ▲                   │
//	   ├──send failed──────┤ (retry count + 1, next retry after the backoff)
//	   └──stuck recovery───┘ (no attempt counted)
//	IN_PROCESS ──retries exhausted──▶ FAILED ──DLQ transfer──▶ DLQ table
//
// See docs/state-machine.md.
type Status string

// The statuses of an outbox row.
const (
	StatusPending   Status = "PENDING"
	StatusInProcess Status = "IN_PROCESS"
	StatusProcessed Status = "PROCESSED"
	StatusFailed    Status = "FAILED"
)

// DLQStatus is the state of a row of the DLQ table.
type DLQStatus string

// The statuses of a DLQ row.
const (
	DLQStatusMoved     DLQStatus = "MOVED"
	DLQStatusToRetry   DLQStatus = "TO_RETRY"
	DLQStatusInProcess DLQStatus = "IN_PROCESS"
	DLQStatusResolved  DLQStatus = "RESOLVED"
)

// DLQSource tells which side put a row in the DLQ table.
type DLQSource string

// The sources of a DLQ row.
const (
	// DLQSourcePublisher: an outbox event that exhausted its retries.
	DLQSourcePublisher DLQSource = "publisher"
	// DLQSourceConsumer: a message whose handler failed (poison routing).
	DLQSourceConsumer DLQSource = "consumer"
)
