package poller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtext"
	"github.com/oncebox/watermill-oncebox/internal/lease"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// Poller relays outbox rows to a broker. Build it with New, start it with
// Run, stop it with Close.
type Poller struct {
	db     wsql.Beginner
	pub    message.Publisher
	logger watermill.LoggerAdapter
	config Config
	events []oncebox.EventConfig
	d      dialects.Relay // the dialect's relay role; config.Dialect for the rest
	locker *lease.Locker
	tracer trace.Tracer

	listener Listener   // nil: polling only (wake.go)
	wakes    *wakeBoard // routes wake-ups to the loops

	sem      chan struct{}   // bounds concurrent database users
	dlqWake  chan struct{}   // a poll marked rows FAILED
	running  chan struct{}   // closed once Run has started every loop
	startErr error           // why Run returned before it ran; set before running is closed
	closing  chan struct{}   // closed by Close
	done     chan struct{}   // closed when Run has returned
	sendCtx  context.Context // cancelled CloseTimeout after closing starts
	claims   *claims         // batches in flight, for the heartbeat (heartbeat.go)

	// dlqRetryMaxSet: Config.DLQRetry.Max was given, not defaulted
	// (dlqRetrySchedule).
	dlqRetryMaxSet bool

	mu        sync.Mutex
	started   bool
	closeOnce sync.Once
}

// New returns a Poller that reads the outbox through db and publishes to
// publisherOut. db is a pool, not a transaction: wrap a pgx pool with
// sql.BeginnerFromPgx or a *sql.DB with sql.BeginnerFromStdSQL. Errors name
// the configuration field at fault.
func New(db wsql.Beginner, publisherOut message.Publisher, config Config, logger watermill.LoggerAdapter) (*Poller, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: poller: db is nil", oncebox.ErrInvalidConfig)
	}
	if _, isTx := db.(interface{ Commit() error }); isTx {
		return nil, fmt.Errorf("%w: poller: db is a transaction; give it a pool (sql.BeginnerFromPgx, sql.BeginnerFromStdSQL)", oncebox.ErrInvalidConfig)
	}
	if publisherOut == nil {
		return nil, fmt.Errorf("%w: poller: publisherOut is nil", oncebox.ErrInvalidConfig)
	}
	dlqRetryMaxSet := config.DLQRetry.Max != 0
	config, events, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkSendTimeout(publisherOut, config.Oncebox.Outbox.MaxBatchProcessingTime); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	p := &Poller{
		db:      db,
		pub:     publisherOut,
		logger:  logger.With(watermill.LogFields{"component": "oncebox-poller", "instance": config.InstanceID}),
		config:  config,
		events:  events,
		d:       config.Dialect,
		locker:  lease.NewLocker(db, config.Dialect, config.InstanceID, config.Clock),
		tracer:  config.TracerProvider.Tracer(tracerName),
		sem:     make(chan struct{}, config.MaxConcurrentQueries),
		dlqWake: make(chan struct{}, 1),
		running: make(chan struct{}),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		claims:  newClaims(),

		dlqRetryMaxSet: dlqRetryMaxSet,
	}
	p.listener, p.wakes = p.wakeOnCommit(db, events)
	warnIfKeysDropped(publisherOut, p.logger)
	return p, nil
}

// Running is closed once Run has started every poll loop and job, or has
// returned (an error at start, or Close before Run): StartErr then says
// which.
func (p *Poller) Running() chan struct{} { return p.running }

// StartErr returns, once Running is closed, the error with which Run
// returned without starting (the start-up checks failed, or Close came
// first), or nil when the relay runs. Read after <-Running(), it cannot
// miss Run's fail-fast error, which a select on Run's result after
// <-Running() can (Running is closed before Run's caller receives it):
//
//	go func() { done <- relay.Run(ctx) }()
//	<-relay.Running()
//	if err := relay.StartErr(); err != nil { … }
func (p *Poller) StartErr() error {
	select {
	case <-p.running:
		return p.startErr
	default:
		return nil
	}
}

// Run checks that the database can serve the relay (Dialect.CheckSchema:
// reachable, migrated, a MySQL DSN with parseTime) and that the relay's
// clock is within Config.MaxClockOffset of the database's, and returns an
// error if not; then it starts the poll loops and the jobs and blocks until ctx is
// cancelled or Close is called; then it stops claiming, lets batches in flight finish for
// up to CloseTimeout, releases what is left and returns. It returns nil on a
// clean stop. It may be called once.
func (p *Poller) Run(ctx context.Context) (err error) {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return errors.New("oncebox: poller: Run called twice")
	}
	p.started = true
	p.mu.Unlock()
	defer close(p.done)
	// Running is closed however Run ends, so that `go p.Run(ctx);
	// <-p.Running()` never hangs on a Run that returned early.
	var runningOnce sync.Once
	markRunning := func() { runningOnce.Do(func() { close(p.running) }) }
	defer func() {
		runningOnce.Do(func() {
			p.startErr = err // Run returns before it ran: StartErr says why
			close(p.running)
		})
	}()
	select {
	case <-p.closing:
		return oncebox.ErrClosed
	default:
	}
	// Fail fast: a database that cannot serve the relay (not reachable, not
	// migrated, a MySQL DSN without parseTime) is an error from Run, not a
	// failure logged by every poll forever. Later failures are retried.
	checkCtx, cancelCheck := p.finalizeCtx()
	err = p.withConn(checkCtx, func() error {
		if err := p.config.Dialect.CheckSchema(checkCtx, p.db); err != nil {
			return err
		}
		return p.clockAtStart(checkCtx) // clockcheck.go
	})
	cancelCheck()
	if err != nil {
		return fmt.Errorf("oncebox: poller cannot start: %w", err)
	}

	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSends()
	p.sendCtx = sendCtx

	var wg sync.WaitGroup
	goLoop := func(f func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(loopCtx)
		}()
	}
	for _, ec := range p.events {
		goLoop(func(ctx context.Context) { p.pollLoop(ctx, ec, false) })
	}
	if !p.config.Oncebox.Outbox.StrictEventTypes {
		d := p.newDiscovery()
		goLoop(func(ctx context.Context) { d.loop(ctx, goLoop) })
	}
	if p.listener != nil {
		goLoop(p.listenLoop)
	}
	// The heartbeat and the recovery (heartbeat.go) outlive the loops:
	// batches still in flight while closing keep their heartbeat until
	// they are finalized, so that no other instance resends them.
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	keeperDone := make(chan struct{})
	go func() {
		defer close(keeperDone)
		p.keepLoop(loopCtx, beatCtx)
	}()
	goLoop(p.cleanUpLoop)
	if p.config.Oncebox.Outbox.DLQ.Enabled {
		goLoop(p.dlqLoop)
		goLoop(p.dlqRetryLoop)
		goLoop(p.dlqCleanUpLoop)
	}
	p.logger.Info("Poller running", watermill.LogFields{"event_types": len(p.events), "dlq": p.config.Oncebox.Outbox.DLQ.Enabled,
		"discovery": !p.config.Oncebox.Outbox.StrictEventTypes, "wake_on_commit": p.listener != nil})
	markRunning()

	select {
	case <-ctx.Done():
	case <-p.closing:
	}
	stopLoops()
	// Batches in flight get CloseTimeout to finish; then their sends are
	// cancelled and their rows released.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	timer := time.NewTimer(p.config.CloseTimeout)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		p.logger.Info("Close timeout reached: cancelling sends in flight", nil)
		stopSends()
		<-finished
	}
	stopBeats()
	<-keeperDone
	p.logger.Info("Poller stopped", nil)
	return nil
}

// Close stops the poller (see Run) and waits for Run to return. It is safe to
// call more than once and before Run.
func (p *Poller) Close() error {
	p.closeOnce.Do(func() { close(p.closing) })
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if started {
		<-p.done
	}
	return nil
}

// withConn runs f while holding one of the MaxConcurrentQueries slots.
func (p *Poller) withConn(ctx context.Context, f func() error) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sem }()
	return f()
}

// finalizeCtx is the context of a statement that records the outcome of a
// batch: it must run even when the poller is closing, so it does not inherit
// cancellation, but it is bounded.
func (p *Poller) finalizeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.config.FinalizeTimeout)
}

// pollLoop is the loop of one event type: poll, then wait what the strategy
// says, or, while the broker is unavailable, what the outage backoff says.
// The first poll is immediate. A discovered type's loop (untilIdle) ends at
// its first poll that claims nothing, or when ctx ends (the discovery ends
// it so to let a waiting type have its turn, discover.go); it reports
// whether any of its polls claimed events.
//
// Pipelining: while full batches are being sent and finalized (each in a
// goroutine of its own, a flight), the next is claimed. A flight's send
// starts once the send of the flight before has ended, so the broker sees
// one instance's events of a type in claim order; its finalize runs in the
// type's finalizer (finalizeLoop), which merges the finalizes that are ready
// together into one commit (dialects.ClaimsFinalizer). At most
// Config.MaxBatchesInFlight batches of a type are held at once (claimed and
// not yet finalized). A partial (unordered) or empty batch, or a flight
// that was not a busy one (released, an outage), ends the overlap: the
// flights still held settle and the last outcome sets the pace as before.
func (p *Poller) pollLoop(ctx context.Context, ec oncebox.EventConfig, untilIdle bool) (claimed bool) {
	s := pacing.New(ec.Polling)
	out := p.newOutage(ec.EventType)
	wake := p.wakes.channel(ec.EventType)
	fin := p.startFinalizer(ec)
	var (
		delay   time.Duration
		woken   bool
		flights []*flight // claimed and not yet settled, oldest first
		overlap bool      // the last flight was full and every one settled since was busy
		settled bool      // a flight settled since the last claim was busy
		// noOverlap, ordered types only: how many more claims wait for the
		// flights to settle first, because a claim made while a batch was
		// in flight found every key of its window busy (one batch held
		// them all): such a claim costs the database a window's read for
		// nothing. Counted down, so that the overlap is tried again.
		noOverlap int
	)
	// settle waits for the oldest flight and applies its outcome to the pace.
	settle := func() {
		f := flights[0]
		flights = flights[1:]
		r := f.wait()
		settled = settled || r.busy
		delay = s.Next(r.busy)
		if r.busy {
			// A full batch that was sent: more rows are probably waiting, so
			// the next claim goes at once. The article's rule waits
			// min-fixed-delay here, which caps a backlog's drain at
			// batch-size per min-fixed-delay (800 rows/s with the defaults);
			// min-fixed-delay is the floor between partial or empty polls
			// only (docs/configuration.md).
			delay = 0
		} else {
			overlap = false
		}
		p.pollDone(ctx, ec, out, r, &delay, woken)
		woken = false
	}
	settleAll := func() {
		for len(flights) > 0 {
			settle()
		}
	}
	defer func() {
		settleAll()
		fin.close()
	}()
	for {
		if !overlap {
			settleAll()
			w := wake
			if out.down {
				w = nil
			}
			var ok bool
			ok, woken = sleepOrWake(ctx, p.config.Clock, delay, w, nil)
			if !ok {
				return
			}
			if ok, wait := out.probe(ctx); !ok {
				delay = wait
				continue
			}
		} else if ctx.Err() != nil {
			return
		}
		for len(flights) >= p.config.MaxBatchesInFlight {
			settle()
		}
		if !overlap && len(flights) > 0 {
			// A flight settled above ended the overlap (a release, an
			// outage): no claim until the pace says so.
			continue
		}
		if noOverlap > 0 && len(flights) > 0 {
			noOverlap--
			settleAll()
		}
		flying := len(flights) > 0
		settled = false
		b, err := p.claimBatch(ec)
		if ec.Ordered() && flying && err == nil && len(b.events) == 0 {
			noOverlap = orderedNoOverlap
		}
		if err != nil || len(b.events) == 0 {
			// The flights before set the pace first, then this poll.
			settleAll()
			if settled && ec.Ordered() {
				// Claimed while a flight was in the air, when the next
				// events of its keys were not heads yet; now they are
				// (docs/ordering.md, "Pacing").
				delay = 0
			} else {
				delay = s.Next(false)
			}
			overlap = false
			p.pollDone(ctx, ec, out, pollResult{err: err}, &delay, woken)
			woken = false
			if untilIdle {
				return
			}
			continue
		}
		claimed = true
		var prev *flight
		if len(flights) > 0 {
			prev = flights[len(flights)-1]
		}
		f := p.fly(ec, b, prev, fin)
		flights = append(flights, f)
		// An ordered batch is partial whenever a key's events cannot all
		// be in it (one event of a key per batch, a hot key's burst): the
		// next claim may still take other keys beside it. A claim beside
		// it that finds every key busy sets noOverlap.
		overlap = f.full || ec.Ordered()
		// Take the outcomes already known without waiting: an outage an
		// earlier flight met stops the claims at once.
		for len(flights) > 0 && flights[0].settled() {
			settle()
		}
	}
}

// pollResult is the outcome of one poll.
type pollResult struct {
	claimed     int
	busy        bool  // a full batch that was sent
	unavailable error // why events were released, if any
	err         error // a database error of the claim or the finalize
}

// pollDone applies a poll's outcome to the outage state and reports it.
func (p *Poller) pollDone(ctx context.Context, ec oncebox.EventConfig, out *outage, r pollResult, delay *time.Duration, woken bool) {
	if woken {
		// A follow-up poll min-fixed-delay after each wake-up: it finds
		// the event of a transaction whose notification the publisher's
		// limiter skipped because this one went out just before, and
		// which committed after this poll's claim (publisher/notify.go).
		*delay = min(*delay, ec.Polling.MinFixedDelay)
		p.wakes.claimed(ec.EventType, r.claimed > 0) // wake.go: coalescing
	}
	switch {
	case r.unavailable != nil && !errors.Is(r.unavailable, errClosing):
		*delay = max(*delay, out.unavailable(r.claimed, r.unavailable))
	case r.claimed > 0:
		out.reached()
	}
	err := r.err
	if closing(ctx, err) {
		err = nil
	}
	if err != nil && ctx.Err() == nil {
		p.logger.Error("Poll failed", err, watermill.LogFields{"event_type": ec.EventType, "next_delay": *delay})
	}
	p.config.Hooks.PollDone(PollInfo{EventType: ec.EventType, Claimed: r.claimed, Full: r.claimed == ec.BatchSize,
		NextDelay: *delay, Err: err})
}

// closing reports whether err is only the end of ctx, the poller's run:
// a statement that waited for a connection slot while the poller closed.
// Hooks and logs do not report it as a failure.
func closing(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// batch is a claimed batch: its rows and the claim's token.
type batch struct {
	token  oncebox.EventID
	events []dialects.ClaimedEvent
}

// claimBatch claims one batch of ec's type.
func (p *Poller) claimBatch(ec oncebox.EventConfig) (batch, error) {
	token, err := oncebox.NewEventID()
	if err != nil {
		return batch{}, err
	}
	var events []dialects.ClaimedEvent
	// Once started, the claim is not cancelled by Close: a claim that
	// committed but whose rows were never read would leave them IN_PROCESS
	// until the recovery, a needless delay. Its connection slot is waited
	// for on the same bounded context.
	claimCtx, cancel := p.finalizeCtx()
	defer cancel()
	err = p.withConn(claimCtx, func() error {
		// claimed_at is the time of the claim, read once the slot is
		// held: read before, a claim that waited for its slot behind
		// busy types would be born as old as the wait, and recovered
		// by another instance before this one's first heartbeat.
		now := p.config.Clock.Now().UTC()
		var err error
		events, err = p.claim(claimCtx, dialects.ClaimParams{EventType: ec.EventType, Limit: ec.BatchSize, Token: token, Now: now,
			Instance: p.config.InstanceID, ByKey: ec.Ordered(), PerKey: p.perKey(ec.BatchSize),
			BlockOnFailure: ec.OnFailure == oncebox.OnFailureBlock})
		return err
	})
	return batch{token: token, events: events}, err
}

// orderedNoOverlap is how many claims of an ordered type wait for the
// batches in flight after a claim made beside them found nothing (pollLoop).
const orderedNoOverlap = 8

// flight is a claimed batch being sent and finalized.
type flight struct {
	full bool
	b    batch
	// sent is closed when the send has ended; results and unavailable
	// (the error that released events of the batch, if any) are set
	// before.
	sent        chan struct{}
	results     []result
	unavailable error
	done        chan pollResult
}

func (f *flight) wait() pollResult {
	r := <-f.done
	f.done <- r
	return r
}

// settled reports whether f's outcome is known (wait will not block).
func (f *flight) settled() bool { return len(f.done) > 0 }

// fly sends b once the send of prev (the flight claimed before, if any) has
// ended, in a goroutine of its own, and hands the outcome to fin. The claim
// is committed: from here on the rows are ours until they are finalized,
// released, or recovered.
func (p *Poller) fly(ec oncebox.EventConfig, b batch, prev *flight, fin *finalizer) *flight {
	f := &flight{full: len(b.events) == ec.BatchSize, b: b, sent: make(chan struct{}), done: make(chan pollResult, 1)}
	go func() {
		if prev != nil {
			<-prev.sent
		}
		var results []result
		switch {
		case p.sendCtx.Err() != nil:
			// CloseTimeout passed while the batch before was being sent:
			// this one is released unsent.
			results = unsent(len(b.events), errClosing)
		case prev != nil && prev.unavailable != nil:
			// The broker went away under the batch before: this one,
			// claimed meanwhile, is released unsent, without an attempt.
			results = unsent(len(b.events), prev.unavailable)
		default:
			results = p.send(p.sendCtx, b.events)
		}
		if p.sendCtx.Err() != nil {
			// Closing cut the sends short: a result may be a cancellation,
			// not a rejection. Count no attempt for anything not confirmed.
			for i := range results {
				if results[i].outcome == outcomeFailed {
					results[i] = result{outcome: outcomeUnavailable, err: errClosing}
				}
			}
		}
		for _, r := range results {
			if r.outcome == outcomeUnavailable {
				f.unavailable = r.err
			}
		}
		f.results = results
		close(f.sent)
		fin.queue <- f
	}()
	return f
}

// unsent is the results of n events released without being sent.
func unsent(n int, err error) []result {
	results := make([]result, n)
	for i := range results {
		results[i] = result{outcome: outcomeUnavailable, err: err}
	}
	return results
}

// finalizer records the outcomes of one type's flights in the order their
// sends ended, which is claim order (finalizeLoop).
type finalizer struct {
	queue chan *flight
	done  chan struct{}
}

// startFinalizer starts the finalizer of ec's type. Its queue holds every
// flight the loop may hold (MaxBatchesInFlight), so a send never waits for
// a finalize.
func (p *Poller) startFinalizer(ec oncebox.EventConfig) *finalizer {
	fin := &finalizer{queue: make(chan *flight, p.config.MaxBatchesInFlight), done: make(chan struct{})}
	go func() {
		defer close(fin.done)
		p.finalizeLoop(ec, fin.queue)
	}()
	return fin
}

// close ends the finalizer; every flight has settled.
func (fin *finalizer) close() {
	close(fin.queue)
	<-fin.done
}

// finalizeLoop finalizes the flights of queue: the first one waiting and,
// in the same finalize, every flight already waiting behind it (their sends
// ended while the finalize before ran).
func (p *Poller) finalizeLoop(ec oncebox.EventConfig, queue chan *flight) {
	for f := range queue {
		group := []*flight{f}
	more:
		for {
			select {
			case g, ok := <-queue:
				if !ok {
					break more
				}
				group = append(group, g)
			default:
				break more
			}
		}
		p.finalizeGroup(ec, group)
	}
}

// claim runs the dialect's claim outside any transaction: the statement
// commits on its own, before anything is sent.
func (p *Poller) claim(ctx context.Context, params dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	out, err := p.d.Claim(ctx, p.db, params)
	if err != nil {
		return nil, fmt.Errorf("oncebox: claim %q: %w", params.EventType, err)
	}
	if len(out) > 0 {
		// Held until finalize: the heartbeat is written while it is.
		p.claims.hold()
	}
	if params.ByKey {
		// The dialect returns an ordered claim in id order, each key's
		// order: a key's head that came due after its successors (a retry)
		// goes before them in the same call.
		return out, nil
	}
	// RETURNING gives no order: send in next_retry_at order, then id order,
	// which is creation order for events made by one instance.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].NextRetryAt.Equal(out[j].NextRetryAt) {
			return out[i].NextRetryAt.Before(out[j].NextRetryAt)
		}
		return string(out[i].ID[:]) < string(out[j].ID[:])
	})
	return out, nil
}

// finalize records the outcome of one batch on its own (no merge) and
// returns the error that made it release events, if any: the finalize of a
// caller that sends a batch itself rather than through a poll loop (Drain).
func (p *Poller) finalize(ec oncebox.EventConfig, token oncebox.EventID, events []dialects.ClaimedEvent, results []result) (unavailable, err error) {
	f := &flight{b: batch{token: token, events: events}, results: results, done: make(chan pollResult, 1)}
	p.finalizeGroup(ec, []*flight{f})
	r := f.wait()
	return r.unavailable, r.err
}

// outcomes are the rows of a batch sorted by the fate of their send.
type outcomes struct {
	confirmed, released []oncebox.EventID
	failed              []dialects.FailedEvent
	failures            []Failure
	unavailable         error // why events were released, if any
}

// sortOutcomes sorts a batch's events by their send's results: PROCESSED
// for the confirmed, the next retry (or FAILED) for the rejected, PENDING
// again without an attempt for the rest.
func sortOutcomes(ec oncebox.EventConfig, events []dialects.ClaimedEvent, results []result, now time.Time) outcomes {
	var o outcomes
	for i, r := range results {
		e := &events[i]
		switch r.outcome {
		case outcomeConfirmed:
			o.confirmed = append(o.confirmed, e.ID)
		case outcomeFailed:
			attempt := e.RetryCount + 1
			f := dialects.FailedEvent{ID: e.ID, RetryCount: attempt, Error: dbtext.Error(r.err)}
			final := attempt > ec.MaxRetries
			if final {
				f.Status, f.NextRetryAt = oncebox.StatusFailed, now
			} else {
				f.Status, f.NextRetryAt = oncebox.StatusPending, now.Add(ec.Backoff.RetryDelay(attempt))
			}
			o.failed = append(o.failed, f)
			o.failures = append(o.failures, Failure{ID: e.ID, Attempt: attempt, Final: final, NextRetryAt: f.NextRetryAt, Err: r.err})
		default:
			o.released = append(o.released, e.ID)
			o.unavailable = r.err
		}
	}
	return o
}

// finalizeGroup records the outcomes of flights whose sends have ended, in
// claim order, and settles each: the confirmed rows of all of them in one
// statement where the dialect allows (markProcessedGroup), then each
// batch's failed and released rows. Every statement matches the claim
// token of each row's batch.
func (p *Poller) finalizeGroup(ec oncebox.EventConfig, group []*flight) {
	now := p.config.Clock.Now().UTC()
	outs := make([]outcomes, len(group))
	for i, f := range group {
		outs[i] = sortOutcomes(ec, f.b.events, f.results, now)
	}
	errs := p.markProcessedGroup(ec, group, outs, now)
	for i, f := range group {
		o := &outs[i]
		if err := p.finalizeRest(ec, f.b.token, o, now); err != nil {
			errs[i] = append(errs[i], err)
		}
		p.claims.release()
		// Ordered, any batch sent is busy: its keys' next events became
		// heads when it was finalized, and a claim that ran meanwhile
		// could not take them (docs/ordering.md, "Pacing").
		busy := f.full || ec.Ordered() && len(f.b.events) > 0
		f.done <- pollResult{claimed: len(f.b.events), busy: busy && o.unavailable == nil, unavailable: o.unavailable,
			err: errors.Join(errs[i]...)}
	}
}

// markProcessedGroup marks the confirmed rows of the group's batches
// PROCESSED and reports those it marked (Hooks.Sent): with one commit
// when two batches or more have some and the dialect is a
// dialects.ClaimsFinalizer, with one MarkProcessed per batch otherwise. It
// returns the errors of each batch.
//
// A merged statement lost with the connection loses the finalize of every
// batch in it: their rows stay IN_PROCESS and the recovery returns them to
// PENDING without an attempt, sent again, not lost — as for one batch.
func (p *Poller) markProcessedGroup(ec oncebox.EventConfig, group []*flight, outs []outcomes, now time.Time) [][]error {
	errs := make([][]error, len(group))
	var claims []dialects.ClaimIDs
	for i := range outs {
		if len(outs[i].confirmed) > 0 {
			claims = append(claims, dialects.ClaimIDs{Token: group[i].b.token, IDs: outs[i].confirmed})
		}
	}
	merger, ok := p.d.(dialects.ClaimsFinalizer)
	if !ok || len(claims) < 2 {
		for i := range outs {
			if len(outs[i].confirmed) == 0 {
				continue
			}
			marked, err := p.markProcessed(ec, group[i].b.token, outs[i].confirmed, now)
			if err != nil {
				errs[i] = append(errs[i], err)
			} else if len(marked) > 0 {
				p.config.Hooks.Sent(ec.EventType, marked)
			}
		}
		return errs
	}
	want := 0
	for _, c := range claims {
		want += len(c.IDs)
	}
	ctx, cancel := p.finalizeCtx()
	defer cancel()
	var marked []oncebox.EventID
	err := p.withConn(ctx, func() error {
		var err error
		marked, err = merger.MarkProcessedClaims(ctx, p.db, claims, now)
		return err
	})
	if err != nil {
		// The rows of every batch stay IN_PROCESS and the recovery returns
		// them to PENDING after max-batch-processing-time (or the heartbeat
		// timeout): sent again, not lost.
		err = fmt.Errorf("oncebox: mark %d events of %q processed (%d batches merged): %w", want, ec.EventType, len(claims), err)
		for i := range outs {
			if len(outs[i].confirmed) > 0 {
				errs[i] = append(errs[i], err)
			}
		}
		return errs
	}
	done := make(map[oncebox.EventID]bool, len(marked))
	for _, id := range marked {
		done[id] = true
	}
	for i := range outs {
		if len(outs[i].confirmed) == 0 {
			continue
		}
		var mine []oncebox.EventID
		for _, id := range outs[i].confirmed {
			if done[id] {
				mine = append(mine, id)
			}
		}
		p.staleCheck(ec, "processed", len(outs[i].confirmed), len(mine))
		if len(mine) > 0 {
			p.config.Hooks.Sent(ec.EventType, mine)
		}
	}
	return errs
}

// finalizeRest records a batch's failed and released rows under its claim
// token.
func (p *Poller) finalizeRest(ec oncebox.EventConfig, token oncebox.EventID, o *outcomes, now time.Time) error {
	var errs []error
	if len(o.failed) > 0 {
		if err := p.markFailed(ec, token, o.failed, now); err != nil {
			errs = append(errs, err)
		}
		for _, f := range o.failures {
			p.logger.Error("Event send failed", f.Err, watermill.LogFields{"event_type": ec.EventType,
				"event_id": f.ID.String(), "attempt": f.Attempt, "final": f.Final, "next_retry_at": f.NextRetryAt})
			if f.Final {
				p.wakeDLQ()
			}
		}
		p.config.Hooks.SendFailed(ec.EventType, o.failures)
	}
	if len(o.released) > 0 {
		ctx, cancel := p.finalizeCtx()
		defer cancel()
		err := p.withConn(ctx, func() error {
			n, err := p.d.ReleaseClaims(ctx, p.db, token, o.released, now)
			if err != nil {
				return err
			}
			p.staleCheck(ec, "released", len(o.released), int(n))
			return nil
		})
		if err != nil {
			// The rows stay IN_PROCESS and the recovery job returns them to
			// PENDING after max-batch-processing-time: sent again, not lost.
			errs = append(errs, fmt.Errorf("oncebox: mark %d events of %q released: %w", len(o.released), ec.EventType, err))
		}
		// Logged once per outage by the poll loop; each batch at DEBUG.
		p.logger.Debug("Batch released without counting an attempt", watermill.LogFields{"event_type": ec.EventType,
			"released": len(o.released), "err": o.unavailable.Error()})
		p.config.Hooks.BrokerUnavailable(ec.EventType, len(o.released), o.unavailable)
	}
	return errors.Join(errs...)
}

// markFailed records the failed attempts. Should the database refuse the
// statement, it is run once more with a plain text in place of each error:
// the attempt must be counted whatever the publisher's error said, or a
// rejected event would be recovered without an attempt and sent forever
// (the rule in docs/design.md). The original errors are in the relay's log.
func (p *Poller) markFailed(ec oncebox.EventConfig, token oncebox.EventID, failed []dialects.FailedEvent, now time.Time) error {
	run := func(fs []dialects.FailedEvent) error {
		ctx, cancel := p.finalizeCtx()
		defer cancel()
		return p.withConn(ctx, func() error {
			n, err := p.d.MarkFailed(ctx, p.db, token, fs, now)
			if err != nil {
				return err
			}
			p.staleCheck(ec, "failed", len(fs), int(n))
			return nil
		})
	}
	err := run(failed)
	if err == nil {
		return nil
	}
	plain := make([]dialects.FailedEvent, len(failed))
	for i, f := range failed {
		f.Error = fmt.Sprintf("oncebox: the publisher's error (%d bytes) could not be stored; see the relay's log for event %s", len(f.Error), f.ID)
		plain[i] = f
	}
	if err2 := run(plain); err2 != nil {
		// The rows stay IN_PROCESS and the recovery returns them to PENDING
		// after max-batch-processing-time; the poll's error is logged and
		// counted (PollDone).
		return fmt.Errorf("oncebox: mark %d events of %q failed: %w", len(failed), ec.EventType, errors.Join(err, err2))
	}
	p.logger.Error("The publisher's error could not be stored; the attempt was recorded with a plain text", err,
		watermill.LogFields{"event_type": ec.EventType, "events": len(failed)})
	return nil
}

// markProcessed marks the confirmed ids PROCESSED and returns those it
// marked: all of them, unless the claim went stale meanwhile.
func (p *Poller) markProcessed(ec oncebox.EventConfig, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	ctx, cancel := p.finalizeCtx()
	defer cancel()
	var marked []oncebox.EventID
	err := p.withConn(ctx, func() error {
		var err error
		marked, err = p.d.MarkProcessed(ctx, p.db, token, ids, now)
		return err
	})
	if err != nil {
		// The rows stay IN_PROCESS and the recovery returns them to PENDING
		// after max-batch-processing-time: sent again, not lost.
		return nil, fmt.Errorf("oncebox: mark %d events of %q processed: %w", len(ids), ec.EventType, err)
	}
	p.staleCheck(ec, "processed", len(ids), len(marked))
	return marked, nil
}

// staleCheck reports a finalize that matched fewer rows than it meant to: the
// claim was recovered and taken again by another instance meanwhile.
func (p *Poller) staleCheck(ec oncebox.EventConfig, what string, want, got int) {
	if got == want {
		return
	}
	p.logger.Info("Stale finalize: the claim was recovered and taken again by another instance",
		watermill.LogFields{"event_type": ec.EventType, "what": what, "want": want, "got": got})
	p.config.Hooks.StaleFinalize(ec.EventType, want, got)
}

func (p *Poller) wakeDLQ() {
	select {
	case p.dlqWake <- struct{}{}:
	default:
	}
}
