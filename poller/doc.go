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
// # One batch's path
//
// A batch goes through three stages, each a type that holds no state between
// two batches: the claim (claim.go), the send (send.go) and the finalize
// (finalize.go). A type's loop (loop.go) drives them through a pipeline of its
// own (pipeline.go: a bound on the batches held and queues that keep claim
// order), takes the outcomes back in claim order and sets its pace with one
// pure function (pace.go). Drain (drain.go) runs the same stages in the
// caller's goroutine. docs/design.md, "The stages of a batch", draws the path.
//
// The lifecycle is forwarder.Forwarder's: New, Run(ctx), Running(), Close().
// Several instances may run on one table with no coordinator; row locks are
// the only coordination.
//
// # Bounds
//
// A Poller runs, for each event type (configured, or discovered: at most
// Config.MaxDiscoveredTypes), three goroutines: a poll loop, a sender and a
// finalizer, which carry at most Config.MaxBatchesInFlight batches at once
// in claim order; and one goroutine each for the heartbeat and recovery, the clean-
// up, the discovery of types nobody configured (unless StrictEventTypes),
// the wake-up listener (with a Listener), and with the DLQ enabled the DLQ
// transfer, the DLQ retry and the DLQ clean-up. Sends hold no database
// connection. The claims, finalizes, discovery and jobs take one of
// Config.MaxConcurrentQueries slots, one connection each, while they use the
// database: the default is thread-pool-size
// (oncebox.Config.MaxConcurrentQueries), else 2 + n, or 5 + n with the DLQ,
// n being the configured types plus one for discovery. The heartbeat and
// recovery goroutine takes no slot: it has a connection of its own, so that
// a live instance's heartbeat never waits behind busy types' claims and
// finalizes. The pool needs MaxConcurrentQueries + 1 connections (+ 1 for
// the wake-up listener on PostgreSQL).
package poller
