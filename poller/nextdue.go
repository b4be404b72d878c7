package poller

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// nextDue is what a type's poll loop knows of the earliest row of the type
// that came or comes due after its last claim (a retry, a delayed event:
// docs/delay.md), so that an idle sleep ends when that row comes due
// instead of up to max-fixed-delay later. It is read again (one index
// probe, dialects.NextDueReader) only when it may have changed: at the
// first sleep, after a claim that took rows (a failed send sets a retry),
// after a wake-up (a commit of this type, which may have written a delayed
// row), and once the known time has come. An idle type with nothing
// waiting reads it once, not at every poll.
type nextDue struct {
	stale bool
	known bool
	at    time.Time
	// since is the clock's time when the last claim began: a row due at or
	// before it was offered to that claim (and not taken: its key held,
	// locked by another instance, past the batch), so it does not cut the
	// sleep; a row due after it, even one due already, does.
	since time.Time
}

// claiming records the start of a claim at now.
func (n *nextDue) claiming(now time.Time) { n.since = now }

// cutToNextDue returns delay, shortened to end when the type's next row
// comes due: zero when one came due since the last claim. A failed read
// leaves delay as it is (the claim reports the database's failures) and is
// tried again at the next sleep. A discovered type's loop (untilIdle) is
// not cut: it ends at its first empty claim and the discovery, which
// probes each type's earliest next_retry_at, starts it again; cut, it
// lost a wake-up of its type (e2e/postgres, TestThroughPgBouncer…).
func (l *typeLoop) cutToNextDue(ctx context.Context, delay time.Duration) time.Duration {
	n := &l.due
	c := l.claimer.conns
	r, ok := c.d.(dialects.NextDueReader)
	if !ok || delay <= 0 || l.untilIdle {
		return delay
	}
	if n.known && !n.at.After(l.clock.Now()) {
		// Its time came while the loop was busy: claim now, and read
		// the next one after that claim.
		n.known, n.stale = false, true
		return 0
	}
	if n.stale {
		since := n.since
		if since.IsZero() {
			since = l.clock.Now()
		}
		var at time.Time
		var found bool
		err := c.with(ctx, func() error {
			var err error
			at, found, err = r.NextDue(ctx, c.db, l.ec.EventType, since.UTC())
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				l.logger.Debug("Reading the next due time failed", watermill.LogFields{"event_type": l.ec.EventType, "err": err.Error()})
			}
			return delay
		}
		n.stale, n.known, n.at = false, found, at
	}
	if n.known {
		// The clock is read after the probe: the sleep ends at n.at
		// however long the probe took.
		delay = min(delay, max(n.at.Sub(l.clock.Now()), 0))
	}
	return delay
}
