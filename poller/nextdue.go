package poller

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// nextDue is what a type's poll loop knows of the earliest row of the type
// that is not due yet (a retry, a delayed event: docs/delay.md), so that an
// idle sleep ends when that row comes due instead of up to max-fixed-delay
// later. It is read again (one index probe, dialects.NextDueReader) only
// when it may have changed: at the first sleep, after a claim that took
// rows (a failed send sets a retry), after a wake-up (a commit of this
// type, which may have written a delayed row), and once the known time has
// come. An idle type with nothing waiting reads it once, not at every poll.
type nextDue struct {
	stale bool
	known bool
	at    time.Time
}

// cut returns delay, shortened to end when the type's next row comes due.
// A failed read leaves delay as it is (the claim reports the database's
// failures) and is tried again at the next sleep.
func (p *Poller) cutToNextDue(ctx context.Context, ec oncebox.EventConfig, n *nextDue, delay time.Duration) time.Duration {
	r, ok := p.d.(dialects.NextDueReader)
	if !ok || delay <= 0 {
		return delay
	}
	now := p.config.Clock.Now().UTC()
	if n.known && !n.at.After(now) {
		n.stale = true
	}
	if n.stale {
		var at time.Time
		var found bool
		err := p.withConn(ctx, func() error {
			var err error
			at, found, err = r.NextDue(ctx, p.db, ec.EventType, now)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				p.logger.Debug("Reading the next due time failed", watermill.LogFields{"event_type": ec.EventType, "err": err.Error()})
			}
			return delay
		}
		n.stale, n.known, n.at = false, found, at
	}
	if n.known {
		delay = min(delay, max(n.at.Sub(now), 0))
	}
	return delay
}
