package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/inprocess"
)

// UnwokenPickupBound is the longest a row set TO_RETRY waits for a relay's
// dlq-retry job that the retry could not wake (MySQL, Oracle and SQLite
// across processes; PostgreSQL to a relay that does not listen): such a
// relay caps the job's pace (poller.Config.DLQRetry, default 10s to 1h) at
// this bound unless its Max is set explicitly, which is then the bound.
const UnwokenPickupBound = 10 * time.Second

// Pickup says when the relays' dlq-retry job moves the rows a retry set
// TO_RETRY back to the outbox (Store.RetryPickup).
type Pickup struct {
	// Woken is true when a retry wakes the job at once: on PostgreSQL (the
	// retry's transaction sends a notification that every relay listening
	// on the tables' channel receives when it commits), and on the other
	// databases when a relay runs in this process over the same
	// inprocess-opened *sql.DB.
	Woken bool
	// Within bounds the wait of a relay that was not woken: its job runs at
	// least every UnwokenPickupBound (with the default pacing).
	Within time.Duration
}

// String is the sentence the CLI and the REST handler show.
func (p Pickup) String() string {
	if p.Woken {
		return fmt.Sprintf("the relays' dlq-retry job was woken: the rows go back to the outbox now (a relay that is not listening runs it within %s)", p.Within)
	}
	return fmt.Sprintf("the relays' dlq-retry job cannot be woken from here: it puts the rows back in the outbox at its next run, within %s", p.Within)
}

// Short is the pickup in two words: "woken" or "within 10s".
func (p Pickup) Short() string {
	if p.Woken {
		return "woken"
	}
	return "within " + p.Within.String()
}

// RetryPickup says when a retry made through this Store is picked up by the
// relays' dlq-retry job: woken at once on PostgreSQL and, in one process,
// through package inprocess; otherwise within UnwokenPickupBound.
func (s *Store) RetryPickup() Pickup {
	p := Pickup{Within: UnwokenPickupBound}
	switch {
	case s.dialect.CanNotify():
		p.Woken = true
	default:
		if hub, ok := inprocess.HubFor(s.db); ok {
			p.Woken = hub.Listening(dialects.NotifyChannel(s.dialect.Tables()))
		}
	}
	return p
}

// change runs a status change (statement, on the db it is given) and, for
// a retry (to TO_RETRY) that changed rows, wakes the relays' dlq-retry job
// once it commits (docs/dlq.md, "When a retry is picked up"):
//
//   - PostgreSQL: a notification (dialects.DLQRetryWakePayload on the
//     tables' channel) sent in the same transaction: the caller's when the
//     Store was built over one, else one the Store opens around the two
//     statements. NOTIFY is transactional, so it reaches the relays only
//     once the rows are TO_RETRY, and never for a change that rolled back;
//     should it fail, the change rolls back with it and the error is
//     returned (nothing was retried).
//   - The other databases: the statement's context is marked
//     (inprocess.OnCommit), so that a *sql.DB opened through package
//     inprocess wakes the relay of this process after the commit. Without
//     such a relay nothing is woken: the relays' job runs within
//     UnwokenPickupBound.
func (s *Store) change(ctx context.Context, to oncebox.DLQStatus,
	stmt func(ctx context.Context, db wsql.ContextExecutor) (int64, error)) (int64, error) {
	if to != oncebox.DLQStatusToRetry {
		return stmt(ctx, s.db)
	}
	channel := dialects.NotifyChannel(s.dialect.Tables())
	if !s.dialect.CanNotify() {
		return stmt(inprocess.OnCommit(ctx, channel, dialects.DLQRetryWakePayload), s.db)
	}
	b, pool := s.db.(wsql.Beginner)
	if !pool {
		// The caller's transaction: the notification goes with it.
		n, err := stmt(ctx, s.db)
		if err != nil || n == 0 {
			return n, err
		}
		return n, s.wake(ctx, s.db, channel)
	}
	tx, err := b.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin the retry's transaction: %w", err)
	}
	n, err := stmt(ctx, tx)
	if err == nil && n > 0 {
		err = s.wake(ctx, tx, channel)
	}
	if err != nil {
		return 0, errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit the retry: %w", err)
	}
	return n, nil
}

func (s *Store) wake(ctx context.Context, tx wsql.ContextExecutor, channel string) error {
	if err := s.dialect.Notify(ctx, tx, channel, dialects.DLQRetryWakePayload); err != nil {
		return fmt.Errorf("wake the relays' dlq-retry job (NOTIFY %s): %w", channel, err)
	}
	return nil
}
