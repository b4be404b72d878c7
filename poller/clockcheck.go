package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
)

// The relay's clock against the database's (Config.MaxClockOffset;
// docs/design.md, "Clocks").
//
// Staleness is judged with the writers' clocks: claimed_at and
// heartbeat_at are written with the clock of the instance that holds the
// claim, and the recovery of another instance compares them with its own.
// Two clocks apart by more than HeartbeatTimeout − Heartbeat make a live
// claim look dead (sent twice, never lost). Rather than move every
// timestamp to the database's clock, which would rewrite every claim and
// finalize statement of every dialect and lose the injectable clock of the
// tests, the relay measures how far its clock is from the database's and
// refuses to start, or reports, beyond a bound.

// clockReading is one measure: the relay's clock just before a statement
// that read the database's clock, the database's reading, and the relay's
// clock just after.
type clockReading struct {
	before, db, after time.Time
}

// offset is the relay's clock minus the database's at the reading, taking
// the middle of the round trip; lo and hi bound it: the database read its
// clock at some instant between before and after.
func (r clockReading) offset() (mid, lo, hi time.Duration) {
	lo, hi = r.before.Sub(r.db), r.after.Sub(r.db)
	return lo + (hi-lo)/2, lo, hi
}

// beyond reports whether the offset is beyond bound whatever instant of the
// round trip the database read its clock at: a slow round trip is never
// taken for a skew.
func beyond(lo, hi, bound time.Duration) bool { return lo > bound || hi < -bound }

// clockCheck is the keeper's state of the check: whether the last reading
// was beyond the bound, so that a crossing is logged once each way.
type clockCheck struct {
	bound  time.Duration // <= 0: the check is off
	beyond bool
}

// checkOn reports whether the relay measures its clock against the
// database's.
func (k *keeper) checkOn() bool { return k.config.MaxClockOffset > 0 }

// readDatabaseClock reads the database's clock once, between two readings
// of the relay's.
func (k *keeper) readDatabaseClock(ctx context.Context) (clockReading, error) {
	before := k.config.Clock.Now()
	db, err := k.conns.d.DatabaseTime(ctx, k.conns.db)
	return clockReading{before: before, db: db, after: k.config.Clock.Now()}, err
}

// clockAtStart measures the relay's clock against the database's at Run,
// and returns an error naming the offset, the bound and the setting when
// the offset is beyond the bound.
func (k *keeper) clockAtStart(ctx context.Context) error {
	if !k.checkOn() {
		return nil
	}
	r, err := k.readDatabaseClock(ctx)
	if err != nil {
		return fmt.Errorf("oncebox: read the database's clock (poller.Config.MaxClockOffset; negative disables the check): %w", err)
	}
	mid, lo, hi := r.offset()
	k.config.Hooks.ClockOffset(mid)
	if beyond(lo, hi, k.config.MaxClockOffset) {
		return fmt.Errorf("this relay's clock is %s the database's (offset %s, round trip %s); "+
			"poller.Config.MaxClockOffset allows %s: claims and heartbeats are judged with the instances' clocks, "+
			"so a live instance's batches could be sent twice. Synchronise the clock (NTP), or raise MaxClockOffset "+
			"(negative disables the check)", aheadOrBehind(mid), mid.Round(time.Millisecond),
			(hi - lo).Round(time.Millisecond), k.config.MaxClockOffset)
	}
	return nil
}

// aheadOrBehind words the sign of an offset.
func aheadOrBehind(offset time.Duration) string {
	if offset < 0 {
		return "behind"
	}
	return "ahead of"
}

// observe takes a reading of a running relay: it reports it to the hooks
// and logs once each time the offset crosses the bound, either way.
func (k *keeper) observe(c *clockCheck, r clockReading) {
	mid, lo, hi := r.offset()
	k.config.Hooks.ClockOffset(mid)
	fields := watermill.LogFields{"offset": mid, "round_trip": hi - lo, "max_clock_offset": c.bound}
	switch {
	case !c.beyond && beyond(lo, hi, c.bound):
		c.beyond = true
		k.logger.Error("This relay's clock is "+aheadOrBehind(mid)+" the database's beyond poller.Config.MaxClockOffset: "+
			"a live instance's batches may be recovered and sent twice; synchronise the clock (NTP)", nil, fields)
	case c.beyond && mid >= -c.bound && mid <= c.bound:
		// Back within, judged by the middle: a reading that is merely
		// uncertain (a slow round trip) does not end the state.
		c.beyond = false
		k.logger.Info("This relay's clock is back within poller.Config.MaxClockOffset of the database's", fields)
	}
}
