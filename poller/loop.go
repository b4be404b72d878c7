package poller

import (
	"context"
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
)

// stages are what every type's loop is built from, shared by the loops
// and Drain: the claim, send and finalize stages of a batch's path, which
// hold no state between two batches.
type stages struct {
	claimer *claimer
	sender  *sender
	fin     *finalizer
	config  Config
	pub     message.Publisher
	logger  watermill.LoggerAdapter
	wakes   *wakeBoard
}

// newLoop returns the loop of ec's type, with a pipeline of its own whose
// sends run on sendCtx; untilIdle: a discovered type's, which ends at its
// first claim that finds nothing.
func (s *stages) newLoop(sendCtx context.Context, ec oncebox.EventConfig, untilIdle bool) *typeLoop {
	return &typeLoop{ec: ec, untilIdle: untilIdle, clock: s.config.Clock, claimer: s.claimer,
		pipe: startPipeline(sendCtx, ec, s.sender, s.fin, s.config.MaxBatchesInFlight),
		out:  newOutage(ec.EventType, s.config, s.pub, s.logger), wake: s.wakes.channel(ec.EventType), wakes: s.wakes,
		logger: s.logger, hooks: s.config.Hooks, pace: newPace(ec.Polling), due: nextDue{stale: true}}
}

// typeLoop is the loop of one event type: claim, hand the batch to the
// pipeline (send, then finalize), take the outcomes back in claim order,
// and wait what the pace says (pace.go), or, while the broker is
// unavailable, what the outage's backoff says. The first claim is
// immediate. A discovered type's loop (untilIdle) ends at its first claim
// that finds nothing, or when ctx ends (the discovery ends it so to let a
// waiting type have its turn, discover.go).
//
// Pipelining: while full batches are being sent and finalized, the next is
// claimed, up to Config.MaxBatchesInFlight batches held at once (claimed
// and not yet finalized). A partial (unordered) or empty batch, or a batch
// that was not a busy one (released, an outage), ends the overlap: the
// batches still held settle and the last outcome sets the pace.
//
// Every field of the second group is owned by the loop's goroutine (run):
// no other goroutine reads or writes it.
type typeLoop struct {
	// Set by newLoop, never changed. pipe and out also hold state of the
	// loop's own (pipeline.held, the outage), which only the loop's
	// goroutine touches.
	ec        oncebox.EventConfig
	untilIdle bool
	clock     oncebox.Clock
	claimer   *claimer
	pipe      *pipeline
	out       *outage
	wake      *waker     // nil: never woken
	wakes     *wakeBoard // told whether a wake-driven poll claimed (coalescing, wake.go)
	logger    watermill.LoggerAdapter
	hooks     Hooks

	// Owned by the loop's goroutine.
	pace  pace
	delay time.Duration // the wait before the next claim, set by the last outcome
	woken bool          // the wait before this poll ended on a wake-up; the first outcome reported after it clears it
	// overlap: the last batch pushed was full (or ordered) and every
	// batch settled since was busy: the next claim goes without waiting.
	overlap bool
	// busySince: a batch settled since the last claim was busy (heads,
	// for an ordered type's claim that found nothing).
	busySince bool
	// noOverlap, ordered types only: how many more claims wait for the
	// batches held to settle first, because a claim made while a batch was
	// in flight found every key of its window busy (one batch held them
	// all): such a claim costs the database a window's read for nothing.
	// Counted down, so that the overlap is tried again.
	noOverlap int
	claimed   bool    // a claim of this loop found events
	due       nextDue // nextdue.go: idle sleeps end when a row comes due
}

// orderedNoOverlap is how many claims of an ordered type wait for the
// batches in flight after a claim made beside them found nothing (typeLoop).
const orderedNoOverlap = 8

// run runs the loop until ctx ends (or, untilIdle, a claim finds nothing)
// and reports whether any of its claims found events. Every batch it
// claimed is settled when it returns.
func (l *typeLoop) run(ctx context.Context) (claimed bool) {
	defer func() {
		l.settleAll(ctx)
		l.pipe.close()
	}()
	for {
		if !l.overlap {
			l.settleAll(ctx)
			w := l.wake
			if l.out.down {
				w = nil
			}
			var ok bool
			ok, l.woken = sleepOrWake(ctx, l.clock, l.cutToNextDue(ctx, l.delay), w, nil)
			if !ok {
				return l.claimed
			}
			l.due.stale = l.due.stale || l.woken
			if ok, wait := l.out.probe(ctx); !ok {
				l.delay, l.pace = l.pace.next(pollOutcome{probed: true, backoff: wait})
				continue
			}
		} else if ctx.Err() != nil {
			return l.claimed
		}
		for l.pipe.full() {
			l.settle(ctx, l.pipe.take())
		}
		if !l.overlap && l.pipe.held > 0 {
			// A batch settled above ended the overlap (a release, an
			// outage): no claim until the pace says so.
			continue
		}
		if l.noOverlap > 0 && l.pipe.held > 0 {
			l.noOverlap--
			l.settleAll(ctx)
		}
		if !l.claim(ctx) && l.untilIdle {
			return l.claimed
		}
	}
}

// claim claims a batch and pushes it to the pipeline, and reports whether
// it found events. A claim that finds nothing (or fails) settles the
// batches held and sets the pace.
func (l *typeLoop) claim(ctx context.Context) bool {
	flying := l.pipe.held > 0
	l.busySince = false
	l.due.claiming(l.clock.Now())
	b, err := l.claimer.claimBatch(l.ec)
	if l.ec.Ordered() && flying && err == nil && len(b.events) == 0 {
		l.noOverlap = orderedNoOverlap
	}
	if err != nil || len(b.events) == 0 {
		// The batches held set the pace first, then this poll.
		l.settleAll(ctx)
		l.overlap = false
		// Claimed while a batch was in the air, when the next events of
		// its keys were not heads yet; now they are (docs/ordering.md,
		// "Pacing").
		l.report(ctx, pollResult{err: err}, pollOutcome{heads: l.busySince && l.ec.Ordered()})
		return false
	}
	l.claimed = true
	l.due.stale = true // a send may fail and set a retry
	l.pipe.push(b)
	// An ordered batch is partial whenever a key's events cannot all be in
	// it (one event of a key per batch, a hot key's burst): the next claim
	// may still take other keys beside it. A claim beside it that finds
	// every key busy sets noOverlap.
	l.overlap = len(b.events) == l.ec.BatchSize || l.ec.Ordered()
	// Take the outcomes already known without waiting: an outage an
	// earlier batch met stops the claims at once.
	for {
		r, ok := l.pipe.ready()
		if !ok {
			break
		}
		l.settle(ctx, r)
	}
	return true
}

// settleAll waits for every batch held, oldest first.
func (l *typeLoop) settleAll(ctx context.Context) {
	for l.pipe.held > 0 {
		l.settle(ctx, l.pipe.take())
	}
}

// settle applies a finalized batch's outcome to the loop and the pace.
func (l *typeLoop) settle(ctx context.Context, r *batchRun) {
	n := len(r.b.events)
	// Ordered, any batch sent is busy: its keys' next events became heads
	// when it was finalized, and a claim that ran meanwhile could not take
	// them (docs/ordering.md, "Pacing").
	busy := (n == l.ec.BatchSize || l.ec.Ordered() && n > 0) && r.final.unavailable == nil
	l.busySince = l.busySince || busy
	if !busy {
		l.overlap = false
	}
	l.report(ctx, pollResult{claimed: n, busy: busy, unavailable: r.final.unavailable, err: r.final.err},
		pollOutcome{settled: true, busy: busy})
}

// pollResult is the outcome of one poll.
type pollResult struct {
	claimed     int
	busy        bool  // a full batch that was sent
	unavailable error // why events were released, if any
	err         error // a database error of the claim or the finalize
}

// report applies a poll's outcome to the outage state and the pace, and
// reports it to the log and Hooks.PollDone. The first outcome after a
// wake-up is the wake-driven poll's.
func (l *typeLoop) report(ctx context.Context, r pollResult, o pollOutcome) {
	if l.woken {
		o.woken, l.woken = true, false
		l.wakes.claimed(l.ec.EventType, r.claimed > 0) // wake.go: coalescing
	}
	switch {
	case r.unavailable != nil && !errors.Is(r.unavailable, errClosing):
		o.backoff = l.out.unavailable(r.claimed, r.unavailable)
	case r.claimed > 0:
		l.out.reached()
	}
	l.delay, l.pace = l.pace.next(o)
	err := r.err
	if closing(ctx, err) {
		err = nil
	}
	if err != nil && ctx.Err() == nil {
		l.logger.Error("Poll failed", err, watermill.LogFields{"event_type": l.ec.EventType, "next_delay": l.delay})
	}
	l.hooks.PollDone(PollInfo{EventType: l.ec.EventType, Claimed: r.claimed, Full: r.claimed == l.ec.BatchSize,
		NextDelay: l.delay, Err: err})
}
