// Package dlq manages the dead letter queue table (outbox_dlq_events): a
// [Store] lists, counts, reads, re-statuses and deletes its rows, for the
// REST handler and the CLI built on it.
//
// A DLQ row holds an outbox event that exhausted its retries (source
// publisher) or a consumed message whose handler failed (source consumer).
// An operator marks rows TO_RETRY, and the relay's job "dlq-retry"
// (poller.JobDLQRetry) puts them back in the outbox: woken by the retry on
// PostgreSQL and in one process (package inprocess), else within
// [UnwokenPickupBound] ([Store.RetryPickup] says which); or RESOLVED, and the
// clean-up "dlq-clean-up" deletes them after outbox.dlq.clean-up.ttl. The
// allowed status changes are checked here and in SQL; see [Allowed] and
// docs/dlq.md.
package dlq
