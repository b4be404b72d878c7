package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
)

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
	// Instance is the claiming instance, stored as claimed_by so that the
	// recovery can tell a dead instance's claims by its heartbeat; ""
	// stores NULL (such claims are recovered after
	// max-batch-processing-time only).
	Instance string
	// ByKey claims, for each key, only the key's first PENDING rows (by
	// id) and only when no row of the type and key is IN_PROCESS
	// (sqlkit.OrderedCandidates, docs/ordering.md): a row with a key is claimed
	// only when every earlier row (by id) of the same type and key is
	// claimed with it or gone. Rows without a key are claimed as before.
	// ordering: key.
	ByKey bool
	// PerKey, with ByKey, is how many rows of one key a claim may take (0
	// means 1: the head only). More than one only for a publisher that
	// keeps a key's order within one call (poller.KeyOrderKeeper).
	PerKey int
	// BlockOnFailure, with ByKey, also holds a key behind an earlier row of
	// it that is FAILED, or whose DLQ row (source publisher) is not
	// RESOLVED: on-failure: block.
	BlockOnFailure bool
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

// ClaimIDs are confirmed ids of one claim, for a finalize that covers
// several claims (ClaimsFinalizer).
type ClaimIDs struct {
	// Token is the claim's token; only rows still IN_PROCESS under it are
	// marked.
	Token oncebox.EventID
	// IDs are the claim's confirmed events.
	IDs []oncebox.EventID
}

// ClaimsFinalizer is implemented by the dialects that mark the confirmed
// rows of several claims PROCESSED with one commit: one statement on
// PostgreSQL, one transaction of each claim's statements on MySQL and
// Oracle. The relay merges through it the finalizes of consecutive batches
// of a type that are ready together; with a dialect that does not
// implement it, it runs MarkProcessed per batch.
type ClaimsFinalizer interface {
	// MarkProcessedClaims marks PROCESSED each id whose row is still
	// IN_PROCESS under its claim's token, all claims at once, and returns
	// the ids it marked.
	MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []ClaimIDs, now time.Time) ([]oncebox.EventID, error)
}

// ConfirmedDeleter is implemented by the dialects that can delete a
// confirmed row at finalize instead of marking it PROCESSED
// (outbox.finalize: delete). The relay uses the dialect DeleteConfirmed
// returns.
type ConfirmedDeleter interface {
	// DeleteConfirmed returns a copy of the dialect whose MarkProcessed and
	// MarkProcessedClaims (ClaimsFinalizer) delete the rows they would mark
	// PROCESSED, under the same guard (the row still IN_PROCESS under the
	// claim's token), and return the ids they deleted. Every other method
	// is the dialect's own.
	DeleteConfirmed() Dialect
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
	// Attempts is the number of handler attempts this failure stands for
	// (the poison queue counts the retries of Watermill's Retry inside
	// it): retry_count of a new row, added to it on a counted attempt.
	// Below 1 counts 1.
	Attempts int
}

// RecoverParams are the bounds of a recovery (Relay.RecoverStale).
type RecoverParams struct {
	// Now is the recovery's time, written to updated_at.
	Now time.Time
	// ClaimedBefore is now minus max-batch-processing-time: rows claimed
	// before it are recovered whoever holds them, a live instance that is
	// merely slow included.
	ClaimedBefore time.Time
	// StaleBefore is now minus the heartbeat timeout: rows claimed before
	// it by an instance whose heartbeat is older than it, or missing, are
	// recovered. It is after ClaimedBefore.
	StaleBefore time.Time
	// Limit bounds the rows of one statement.
	Limit int
}

// DueType is one event type found by the relay's discovery (Relay.DueTypes).
type DueType struct {
	// Name is the event type.
	Name string
	// Due is true when one of its PENDING rows is due.
	Due bool
}

// Relay is what the relay (package poller) and the clean-up jobs ask of the
// dialect: claims, finalizes, recovery, heartbeats, the DLQ's retries and
// the job lease. The methods that take a wsql.Beginner and write run their
// statement in a transaction of their own at the relay's isolation level
// (READ COMMITTED on MySQL whatever the server's default; a transaction the
// database chose as a deadlock victim is run again).
type Relay interface {
	// DueTypes returns, in order, up to limit distinct event types greater
	// than after (the whole range when after is "") that have a PENDING
	// row, each with whether one of its PENDING rows is due at now. It is
	// the relay's discovery of types nobody configured, which pages through
	// the types with after. It probes the claim index once or twice per
	// type (a loose index scan: the first entry of each type, then its
	// earliest next_retry_at), so its cost grows with the number of types
	// that have PENDING rows, never with the number of rows: rows waiting
	// for a retry are not read.
	DueTypes(ctx context.Context, db wsql.ContextExecutor, now time.Time, after string, limit int) ([]DueType, error)
	// Claim locks up to p.Limit due PENDING rows of p.EventType that no other
	// claimer holds, flips them to IN_PROCESS with p.Token and returns them,
	// committed before it returns: one statement on PostgreSQL, a
	// select-for-update-skip-locked then an update in one READ COMMITTED
	// transaction on MySQL and Oracle.
	Claim(ctx context.Context, db wsql.Beginner, p ClaimParams) ([]ClaimedEvent, error)
	// MarkProcessed marks ids PROCESSED where the claim token matches and
	// returns the ids it marked.
	MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error)
	// MarkFailed writes each row's new state after a failed send where the
	// claim token matches, and returns the rows it changed (fewer than rows
	// when a claim is stale).
	MarkFailed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, rows []FailedEvent, now time.Time) (int64, error)
	// ReleaseClaims returns ids to PENDING, where the token matches, without
	// counting an attempt, and returns the rows it changed.
	ReleaseClaims(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) (int64, error)
	// MoveToDLQ moves up to limit FAILED rows to the DLQ table atomically
	// and returns how many it moved.
	MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error)
	// DeleteProcessed deletes up to limit PROCESSED rows updated before
	// cutoff and returns how many it deleted.
	DeleteProcessed(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error)
	// AcquireLease takes the job lease l unless a live lease is held, and
	// reports whether it took it.
	AcquireLease(ctx context.Context, db wsql.ContextExecutor, l Lease) (bool, error)
	// ReleaseLease ends the lease l.Owner took at l.LockedAt at l.Until.
	ReleaseLease(ctx context.Context, db wsql.Beginner, l Lease) error
	// TransferDLQToOutbox moves up to limit TO_RETRY rows back to the outbox
	// (PENDING, retry_count 0, due now; an event id already there is
	// re-armed) and removes them from the DLQ atomically, and returns the
	// number of DLQ rows moved.
	TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error)
	// DeleteResolvedDLQ deletes up to limit RESOLVED DLQ rows last updated
	// before cutoff and returns how many it deleted.
	DeleteResolvedDLQ(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error)
	// Heartbeats and the recovery of a dead instance's claims (migration
	// 3; see docs/design.md, "Recovery").

	// Heartbeat records that instance is alive at at: its row in the
	// instances table, inserted or updated.
	Heartbeat(ctx context.Context, db wsql.Beginner, instance string, at time.Time) error
	// EndInstance deletes the heartbeat row of instance (at Close).
	EndInstance(ctx context.Context, db wsql.Beginner, instance string) error
	// DeleteInstancesBefore deletes the heartbeat rows older than cutoff
	// (instances gone without Close) and returns how many it deleted.
	DeleteInstancesBefore(ctx context.Context, db wsql.Beginner, cutoff time.Time) (int64, error)
	// RecoverStale returns up to p.Limit IN_PROCESS rows to PENDING
	// without counting an attempt: those claimed before p.ClaimedBefore
	// (max-batch-processing-time, whoever holds them), and those claimed
	// before p.StaleBefore by an instance whose heartbeat is older than
	// p.StaleBefore or missing. Claims without claimed_by (taken before
	// migration 3) only go by the first bound. It reports the rows it
	// recovered, whether any row was IN_PROCESS (someone's claim is in
	// flight, so the caller keeps watching) and the database's clock, in
	// UTC, read by the first statement (for the relay's clock check,
	// docs/design.md, "Clocks"): one statement on PostgreSQL; on MySQL and
	// Oracle a plain-read probe, then the update only when a row is
	// IN_PROCESS.
	RecoverStale(ctx context.Context, db wsql.Beginner, p RecoverParams) (recovered int, inProcess bool, dbNow time.Time, err error)
	// DatabaseTime reads the database's current time, in UTC.
	DatabaseTime(ctx context.Context, db wsql.ContextExecutor) (time.Time, error)
}
