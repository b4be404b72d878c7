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
func (p *Poller) keepLoop(jobs, beats context.Context) {
	var (
		idle = p.config.Recovery.Strategy()
		// The first run one heartbeat after the start, not after
		// Recovery.Min: an instance started to replace a dead one finds
		// the dead one's claims in flight and watches them, so they are
		// recovered within the heartbeat timeout. One statement a start.
		delay = p.config.Heartbeat
		fast  bool // holding claims, or a row IN_PROCESS was seen
		beat  bool // a heartbeat row was written
		// The clock check (clockcheck.go) rides on the recovery: its
		// first statement reads the database's clock.
		check = clockCheck{bound: p.config.MaxClockOffset}
	)
	for {
		if !p.keepSleep(beats, jobs, &delay, &fast) {
			break
		}
		holding := p.claims.holding()
		if holding {
			if err := p.heartbeat(beats); err != nil {
				// Should it fail for HeartbeatTimeout, another instance may
				// recover and resend these batches: duplicates, which the
				// finalize guard keeps from overwriting anything.
				p.logger.Error("Heartbeat failed", err, watermill.LogFields{"next_delay": p.config.Heartbeat})
			} else {
				beat = true
			}
		}
		if jobs.Err() != nil {
			fast, delay = holding, p.config.Heartbeat
			continue
		}
		start := p.config.Clock.Now()
		rows, inProcess, reading, err := p.recoverOnce(jobs)
		if err != nil {
			inProcess = fast // the database did not say: keep the pace
		}
		if check.bound > 0 && !reading.db.IsZero() {
			p.observe(&check, reading)
		}
		if rows > 0 {
			// The recovered rows are PENDING again: the loops (and the
			// discovery) poll at once instead of at their current delay,
			// which after an idle spell is up to max-fixed-delay.
			p.wakes.wakeAll()
		}
		switch {
		case holding || inProcess:
			fast, delay = true, p.config.Heartbeat
		case fast:
			// Nothing in flight anywhere any more: back to the idle
			// schedule, from its start.
			fast, idle = false, p.config.Recovery.Strategy()
			delay = idle.Next(false)
		default:
			delay = idle.Next(rows > 0)
		}
		p.jobDone(jobs, JobRecovery, pacing.JobResult{Rows: rows, Err: err}, p.config.Clock.Since(start), delay)
	}
	if beat {
		ctx, cancel := p.finalizeCtx()
		defer cancel()
		if err := p.d.EndInstance(ctx, p.db, p.config.InstanceID); err != nil {
			// The clean-up deletes it after max-batch-processing-time.
			p.logger.Error("Could not delete the instance's heartbeat", err, nil)
		}
	}
}

// keepSleep waits *delay on the clock and reports false when beats ended
// first. While not fast, the first claim after none (claims.busy) cuts the
// wait short: the next run is then one heartbeat interval away, so that a
// batch still in flight by then gets its heartbeat, and one finalized
// before costs none.
func (p *Poller) keepSleep(beats, jobs context.Context, delay *time.Duration, fast *bool) bool {
	for {
		if jobs.Err() != nil && !*fast && !p.claims.holding() {
			// Closing with nothing in flight: nothing to beat for; wait
			// for a batch whose claim was already under way, or the end.
			select {
			case <-p.claims.busy:
				*fast, *delay = true, p.config.Heartbeat
			case <-beats.Done():
				return false
			}
		}
		start := p.config.Clock.Now()
		t := clock.NewTimer(p.config.Clock, *delay)
		select {
		case <-t.Chan():
			return true
		case <-beats.Done():
			t.Stop()
			return false
		case <-p.claims.busy:
			t.Stop()
			if !*fast {
				*fast, *delay = true, p.config.Heartbeat
				continue
			}
			// Already beating: keep the cadence. The timer is made again
			// for what is left of the wait.
			*delay = max(0, *delay-p.config.Clock.Since(start))
		}
	}
}

// heartbeat writes this instance's heartbeat, bounded by HeartbeatTimeout
// (a later one would be worthless). It runs on the keeper's own
// connection, outside the MaxConcurrentQueries slots (see keepLoop).
func (p *Poller) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.config.HeartbeatTimeout)
	defer cancel()
	return p.d.Heartbeat(ctx, p.db, p.config.InstanceID, p.config.Clock.Now().UTC())
}

// recoverOnce runs the recovery, JobBatchSize rows a statement, on the
// keeper's own connection, and reports the rows recovered, whether any row
// was IN_PROCESS, and the database's clock as the first statement read it
// (zero if none answered), between the relay's clock before and after.
func (p *Poller) recoverOnce(ctx context.Context) (rows int, inProcess bool, reading clockReading, err error) {
	limit := p.config.JobBatchSize
	for ctx.Err() == nil {
		now := p.config.Clock.Now().UTC()
		n, in, dbNow, err := p.d.RecoverStale(ctx, p.db, dialects.RecoverParams{Now: now,
			ClaimedBefore: now.Add(-p.config.Oncebox.Outbox.MaxBatchProcessingTime),
			StaleBefore:   now.Add(-p.config.HeartbeatTimeout), Limit: limit})
		if reading.db.IsZero() && !dbNow.IsZero() {
			reading = clockReading{before: now, db: dbNow, after: p.config.Clock.Now()}
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
