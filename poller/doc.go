// Package poller is the relay: it moves committed outbox rows to a broker,
// replacing Watermill's components/forwarder.
//
// A [Poller] runs one poll loop per event type and up to five background
// jobs:
//
//   - the poll loop of a type claims a batch of due PENDING rows in one
//     statement (FOR UPDATE SKIP LOCKED, so instances never queue behind each
//     other), commits the claim, sends the batch to the publisher, and marks
//     PROCESSED only what was confirmed; a failed message is retried after
//     delay × multiplier^n and becomes FAILED when its retries run out;
//   - stuck recovery returns rows left IN_PROCESS longer than
//     max-batch-processing-time to PENDING without counting an attempt;
//   - DLQ transfer (when the DLQ is enabled) moves FAILED rows to the DLQ
//     table in one transaction;
//   - DLQ retry (when the DLQ is enabled, job "dlq-retry") moves DLQ rows an
//     operator marked TO_RETRY back to the outbox as PENDING events with
//     their event id, in one transaction (see package dlq);
//   - clean-up deletes PROCESSED rows older than the ttl, on one instance at a
//     time under a lease in the jobs table; with the DLQ enabled a second
//     clean-up deletes RESOLVED DLQ rows older than outbox.dlq.clean-up.ttl
//     under the lease "dlq-clean-up".
//
// Every loop paces itself adaptively: a full batch resets its delay to the
// minimum, a partial or empty one multiplies it, up to the maximum, so an idle
// type costs about 70 polls an hour.
//
// The lifecycle is forwarder.Forwarder's: New, Run(ctx), Running(), Close().
// Several instances may run on one table with no coordinator; row locks are
// the only coordination.
//
// # Bounds
//
// A Poller runs n + 2 goroutines (n event types, recovery, clean-up), plus
// three when the DLQ is enabled (DLQ transfer, DLQ retry, DLQ clean-up):
// n + 5. Each holds at most one database connection at a time, so it uses
// at most n + 2 connections, or n + 5 with the DLQ, which is the default of
// Config.MaxConcurrentQueries (and of thread-pool-size); set lower, it bounds the database users
// further. The heartbeat and recovery goroutine takes no
// MaxConcurrentQueries slot: it has a connection of its own, so that a
// live instance's heartbeat never waits behind busy types' claims and
// finalizes. The pool needs MaxConcurrentQueries + 1 connections (+ 1 for
// the wake-up listener on PostgreSQL). Sends do not hold a connection.
package poller
