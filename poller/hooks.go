package poller

import (
	"time"

	"github.com/oncebox/watermill-oncebox"
)

// Hooks receives what the poller does, for metrics, tracing and tests.
// Methods are called synchronously from the poller's goroutines: return
// quickly. Embed NopHooks to implement only some.
type Hooks interface {
	// PollDone is called after every poll of an event type.
	PollDone(PollInfo)
	// Sent is called with the events the broker confirmed and that were
	// marked PROCESSED.
	Sent(eventType string, ids []oncebox.EventID)
	// SendFailed is called with the events whose send failed (each counted
	// as an attempt).
	SendFailed(eventType string, failures []Failure)
	// BrokerUnavailable is called when a batch was released without counting
	// an attempt because the broker could not be reached (or the poller was
	// closing).
	BrokerUnavailable(eventType string, released int, err error)
	// BrokerOutage is called when an event type's broker becomes unavailable
	// (down is true, with the error that showed it) and when it is reached
	// again (down is false): once per change, however many batches were
	// released in between.
	BrokerOutage(eventType string, down bool, err error)
	// StaleFinalize is called when a finalize matched fewer rows than it
	// meant to: the claim had been recovered and taken by another instance.
	StaleFinalize(eventType string, want, got int)
	// NotifyQueueUsage is called with the usage of PostgreSQL's
	// notification queue (pg_notification_queue_usage(), 0 to 1) each time
	// the wake-up listener reads it: once its LISTEN is in effect, then at
	// most once a minute while notifications arrive and every 10 minutes
	// otherwise (docs/design.md, "Wake-up on commit"). Called only with a
	// Listener that is a QueueWatcher (PgxListener is).
	NotifyQueueUsage(ratio float64)
	// JobDone is called after every run of a background job.
	JobDone(JobInfo)
	// ClockOffset is called with each measure of this relay's clock
	// against the database's (Config.MaxClockOffset): at Run and on every
	// recovery run, while the check is on. offset is the relay's clock
	// minus the database's: positive when the relay's is ahead.
	ClockOffset(offset time.Duration)
}

// PollInfo describes one poll of an event type.
type PollInfo struct {
	EventType string
	// Claimed is the number of rows claimed.
	Claimed int
	// Full reports a full batch.
	Full bool
	// NextDelay is the wait before the next poll.
	NextDelay time.Duration
	// Err is a database error of the claim or finalize, if any.
	Err error
}

// Failure is one event whose send failed.
type Failure struct {
	ID oncebox.EventID
	// Attempt is the number of attempts made so far, this one included.
	Attempt int
	// Final reports that the retries are exhausted: the row is FAILED.
	Final bool
	// NextRetryAt is when it will be tried again, unless Final.
	NextRetryAt time.Time
	Err         error
}

// Job names, as reported in JobInfo and stored in the jobs table.
const (
	JobRecovery      = "outbox-recovery"
	JobDLQTransfer   = "outbox-dlq-transfer"
	JobOutboxCleanUp = "outbox-clean-up"
	// JobDLQRetry moves TO_RETRY rows of the DLQ table back to the outbox.
	JobDLQRetry = "dlq-retry"
	// JobDLQCleanUp deletes RESOLVED DLQ rows older than
	// outbox.dlq.clean-up.ttl, under the lease of the same name.
	JobDLQCleanUp = "dlq-clean-up"
)

// JobInfo describes one run of a background job.
type JobInfo struct {
	Job string
	// Skipped reports that another instance held the job's lease.
	Skipped bool
	// Rows is the number of rows recovered, moved or deleted.
	Rows int
	// Duration is how long the run took.
	Duration time.Duration
	// NextDelay is the wait before the next run.
	NextDelay time.Duration
	Err       error
}

// NopHooks implements Hooks and does nothing.
type NopHooks struct{}

var _ Hooks = NopHooks{}

// PollDone implements Hooks.
func (NopHooks) PollDone(PollInfo) {}

// Sent implements Hooks.
func (NopHooks) Sent(string, []oncebox.EventID) {}

// SendFailed implements Hooks.
func (NopHooks) SendFailed(string, []Failure) {}

// BrokerUnavailable implements Hooks.
func (NopHooks) BrokerUnavailable(string, int, error) {}

// BrokerOutage implements Hooks.
func (NopHooks) BrokerOutage(string, bool, error) {}

// StaleFinalize implements Hooks.
func (NopHooks) StaleFinalize(string, int, int) {}

// NotifyQueueUsage implements Hooks.
func (NopHooks) NotifyQueueUsage(float64) {}

// JobDone implements Hooks.
func (NopHooks) JobDone(JobInfo) {}

// ClockOffset implements Hooks.
func (NopHooks) ClockOffset(time.Duration) {}
