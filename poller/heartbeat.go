package poller

import (
	"context"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// Heartbeats and recovery (docs/design.md, "Recovery after a crash").
//
// A claim records its instance (claimed_by). An instance that holds claims
// writes its heartbeat every Config.Heartbeat; the recovery, run by every
// instance, returns to PENDING the claims whose instance's heartbeat is
// older than Config.HeartbeatTimeout (or missing), besides those older than
// max-batch-processing-time. What it costs:
//
//   - An instance that holds no claims writes no heartbeat: nobody needs it,
//     since it has nothing to recover. A batch finalized within one
//     heartbeat interval of its claim costs none either: the claim's
//     claimed_at stands for a heartbeat that long. So an idle instance
//     makes no heartbeat statement at all.
//   - The recovery runs every Heartbeat while the instance holds claims or
//     its last run saw a row IN_PROCESS (someone's batch in flight, which
//     may turn out dead); otherwise it keeps its idle schedule
//     (Config.Recovery, 60s to 300s with the defaults), one statement a run
//     as before. An idle hour costs what it cost before migration 3.
//
// The price of the idle schedule: an instance that holds no claims and saw
// no row IN_PROCESS at its last run looks again only on that schedule. A
// crash while every other instance is idle is recovered on it (at most
// max-batch-processing-time later), not within the heartbeat timeout.

// keeper writes the heartbeat and runs the recovery and the clock check
// (clockcheck.go), in one goroutine of its own (keepLoop).
type keeper struct {
	config  Config
	conns   *conns // its statements take no slot (keepLoop)
	logger  watermill.LoggerAdapter
	claims  *claims
	wakes   *wakeBoard // woken when rows are recovered
	jobDone func(ctx context.Context, name string, r pacing.JobResult, took, next time.Duration)

	// Owned by the keeper's goroutine (keepLoop, keepSleep).
	delay time.Duration // the wait before the next run
	fast  bool          // holding claims, or a row IN_PROCESS was seen: runs every Heartbeat
}

// claims counts the batches this instance has in flight: claimed and not
// yet finalized.
type claims struct {
	mu   sync.Mutex
	n    int
	busy chan struct{} // a first batch after none; never blocks the claim
}

func newClaims() *claims { return &claims{busy: make(chan struct{}, 1)} }

// hold counts a claimed batch, and wakes the keeper at the first one.
func (c *claims) hold() {
	c.mu.Lock()
	c.n++
	first := c.n == 1
	c.mu.Unlock()
	if first {
		select {
		case c.busy <- struct{}{}:
		default:
		}
	}
}

// release counts a finalized batch.
func (c *claims) release() {
	c.mu.Lock()
	c.n--
	c.mu.Unlock()
}

// holding reports whether a batch is in flight.
func (c *claims) holding() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n > 0
}

// keepLoop writes this instance's heartbeat while it holds claims and runs
// the recovery, until beats ends. jobs ends when the poller starts closing:
// from then on no recovery runs, but the heartbeat goes on while batches in
// flight finish (up to CloseTimeout), so that nobody recovers a batch that
// is about to be finalized. beats ends once every batch is finalized; the
// instance's row is then deleted.
//
// It is one goroutine, waiting on the clock as the recovery job always did,
// so an idle poller has as many timers as before.
//
// Its statements (heartbeat, recovery, EndInstance) take no
// MaxConcurrentQueries slot: they run one at a time on a connection of
// their own, one more than MaxConcurrentQueries. Behind the claims and
// finalizes of many busy types, whose statements queue for those slots
// (FIFO), a heartbeat could wait past HeartbeatTimeout: the live
// instance's claims would be recovered by another instance and sent
// again, and every finalize refused as stale — a livelock (issue 21,
// row 2). The keeper is one goroutine, so its own slot needs no
// semaphore.
func (k *keeper) keepLoop(jobs, beats context.Context) {
	// The first run one heartbeat after the start, not after
	// Recovery.Min: an instance started to replace a dead one finds the
	// dead one's claims in flight and watches them, so they are recovered
	// within the heartbeat timeout. One statement a start.
	k.delay, k.fast = k.config.Heartbeat, false
	var (
		idle = k.config.Recovery.Strategy()
		beat = false // a heartbeat row was written
		// The clock check (clockcheck.go) rides on the recovery: its
		// first statement reads the database's clock.
		check = clockCheck{bound: k.config.MaxClockOffset}
	)
	for {
		if !k.keepSleep(beats, jobs) {
			break
		}
		holding := k.claims.holding()
		if holding {
			if err := k.heartbeat(beats); err != nil {
				// Should it fail for HeartbeatTimeout, another instance may
				// recover and resend these batches: duplicates, which the
				// finalize guard keeps from overwriting anything.
				k.logger.Error("Heartbeat failed", err, watermill.LogFields{"next_delay": k.config.Heartbeat})
			} else {
				beat = true
			}
		}
		if jobs.Err() != nil {
			k.fast, k.delay = holding, k.config.Heartbeat
			continue
		}
		start := k.config.Clock.Now()
		rows, inProcess, reading, err := k.recoverOnce(jobs)
		if err != nil {
			inProcess = k.fast // the database did not say: keep the pace
		}
		if check.bound > 0 && !reading.db.IsZero() {
			k.observe(&check, reading)
		}
		if rows > 0 {
			// The recovered rows are PENDING again: the loops (and the
			// discovery) poll at once instead of at their current delay,
			// which after an idle spell is up to max-fixed-delay.
			k.wakes.wakeAll()
		}
		switch {
		case holding || inProcess:
			k.fast, k.delay = true, k.config.Heartbeat
		case k.fast:
			// Nothing in flight anywhere any more: back to the idle
			// schedule, from its start.
			k.fast, idle = false, k.config.Recovery.Strategy()
			k.delay = idle.Next(false)
		default:
			k.delay = idle.Next(rows > 0)
		}
		k.jobDone(jobs, JobRecovery, pacing.JobResult{Rows: rows, Err: err}, k.config.Clock.Since(start), k.delay)
	}
	if beat {
		ctx, cancel := k.conns.finalizeCtx()
		defer cancel()
		if err := k.conns.d.EndInstance(ctx, k.conns.db, k.config.InstanceID); err != nil {
			// The clean-up deletes it after max-batch-processing-time.
			k.logger.Error("Could not delete the instance's heartbeat", err, nil)
		}
	}
}

// keepSleep waits k.delay on the clock and reports false when beats ended
// first. While not fast, the first claim after none (claims.busy) cuts the
// wait short: the next run is then one heartbeat interval away, so that a
// batch still in flight by then gets its heartbeat, and one finalized
// before costs none.
func (k *keeper) keepSleep(beats, jobs context.Context) bool {
	for {
		if jobs.Err() != nil && !k.fast && !k.claims.holding() {
			// Closing with nothing in flight: nothing to beat for; wait
			// for a batch whose claim was already under way, or the end.
			select {
			case <-k.claims.busy:
				k.fast, k.delay = true, k.config.Heartbeat
			case <-beats.Done():
				return false
			}
		}
		start := k.config.Clock.Now()
		t := clock.NewTimer(k.config.Clock, k.delay)
		select {
		case <-t.Chan():
			return true
		case <-beats.Done():
			t.Stop()
			return false
		case <-k.claims.busy:
			t.Stop()
			if !k.fast {
				k.fast, k.delay = true, k.config.Heartbeat
				continue
			}
			// Already beating: keep the cadence. The timer is made again
			// for what is left of the wait.
			k.delay = max(0, k.delay-k.config.Clock.Since(start))
		}
	}
}

// heartbeat writes this instance's heartbeat, bounded by HeartbeatTimeout
// (a later one would be worthless). It runs on the keeper's own
// connection, outside the MaxConcurrentQueries slots (see keepLoop).
func (k *keeper) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, k.config.HeartbeatTimeout)
	defer cancel()
	return k.conns.d.Heartbeat(ctx, k.conns.db, k.config.InstanceID, k.config.Clock.Now().UTC())
}

// recoverOnce runs the recovery, JobBatchSize rows a statement, on the
// keeper's own connection, and reports the rows recovered, whether any row
// was IN_PROCESS, and the database's clock as the first statement read it
// (zero if none answered), between the relay's clock before and after.
func (k *keeper) recoverOnce(ctx context.Context) (rows int, inProcess bool, reading clockReading, err error) {
	limit := k.config.JobBatchSize
	for ctx.Err() == nil {
		now := k.config.Clock.Now().UTC()
		n, in, dbNow, err := k.conns.d.RecoverStale(ctx, k.conns.db, dialects.RecoverParams{Now: now,
			ClaimedBefore: now.Add(-k.config.Oncebox.Outbox.MaxBatchProcessingTime),
			StaleBefore:   now.Add(-k.config.HeartbeatTimeout), Limit: limit})
		if reading.db.IsZero() && !dbNow.IsZero() {
			reading = clockReading{before: now, db: dbNow, after: k.config.Clock.Now()}
		}
		if err != nil {
			return rows, inProcess, reading, err
		}
		rows, inProcess = rows+n, inProcess || in
		if n < limit {
			return rows, inProcess, reading, nil
		}
	}
	return rows, inProcess, reading, ctx.Err()
}
