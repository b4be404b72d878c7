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
	d      dialects.Dialect
	locker *lease.Locker
	tracer trace.Tracer

	listener Listener   // nil: polling only (wake.go)
	wakes    *wakeBoard // routes wake-ups to the loops

	sem     chan struct{}   // bounds concurrent database users
	dlqWake chan struct{}   // a poll marked rows FAILED
	running chan struct{}   // closed once Run has started every loop
	closing chan struct{}   // closed by Close
	done    chan struct{}   // closed when Run has returned
	sendCtx context.Context // cancelled CloseTimeout after closing starts
	claims  *claims         // batches in flight, for the heartbeat (heartbeat.go)

	mu        sync.Mutex
	started   bool
	closeOnce sync.Once
}

// New returns a Poller that reads the outbox through db and publishes to
// publisherOut. db is a pool, not a transaction: wrap a pgx pool with
// sql.BeginnerFromPgx or a *sql.DB with sql.BeginnerFromStdSQL. Errors name
// the configuration field at fault.
func New(db wsql.Beginner, publisherOut message.Publisher, logger watermill.LoggerAdapter, config Config) (*Poller, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: poller: db is nil", oncebox.ErrInvalidConfig)
	}
	if _, isTx := db.(interface{ Commit() error }); isTx {
		return nil, fmt.Errorf("%w: poller: db is a transaction; give it a pool (sql.BeginnerFromPgx, sql.BeginnerFromStdSQL)", oncebox.ErrInvalidConfig)
	}
	if publisherOut == nil {
		return nil, fmt.Errorf("%w: poller: publisherOut is nil", oncebox.ErrInvalidConfig)
	}
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
	}
	p.listener, p.wakes = p.wakeOnCommit(db, events)
	warnIfKeysDropped(publisherOut, p.logger)
	return p, nil
}

// Running is closed once Run has started every poll loop and job, or has
// returned (an error at start, or Close before Run).
func (p *Poller) Running() chan struct{} { return p.running }

// Run checks that the database can serve the relay (dialects.CheckSchema:
// reachable, migrated, a MySQL DSN with parseTime) and returns an error if
// not; then it starts the poll loops and the jobs and blocks until ctx is
// cancelled or Close is called; then it stops claiming, lets batches in flight finish for
// up to CloseTimeout, releases what is left and returns. It returns nil on a
// clean stop. It may be called once.
func (p *Poller) Run(ctx context.Context) error {
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
	defer markRunning()
	select {
	case <-p.closing:
		return oncebox.ErrClosed
	default:
	}
	// Fail fast: a database that cannot serve the relay (not reachable, not
	// migrated, a MySQL DSN without parseTime) is an error from Run, not a
	// failure logged by every poll forever. Later failures are retried.
	checkCtx, cancelCheck := p.finalizeCtx()
	err := p.withConn(checkCtx, func() error { return dialects.CheckSchema(checkCtx, p.db, p.d) })
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
// its first poll that claims nothing.
//
// Pipelining: while a full batch is being sent and finalized (in a
// goroutine, a flight), the next batch is claimed; its send starts only once
// the flight has ended, so the broker sees one instance's events of a type
// in claim order, and at most two batches of a type are held at once (the
// one in flight and the one just claimed). A partial or empty batch ends the
// overlap: its outcome sets the pace as before.
func (p *Poller) pollLoop(ctx context.Context, ec oncebox.EventConfig, untilIdle bool) {
	s := pacing.New(ec.Polling)
	out := p.newOutage(ec.EventType)
	wake := p.wakes.channel(ec.EventType)
	var (
		delay   time.Duration
		woken   bool
		flight  *flight // the batch being sent and finalized, if any
		settled bool    // the last flight settled was busy
	)
	// settle waits for the flight and applies its outcome to the pace.
	settle := func() {
		r := flight.wait()
		flight = nil
		settled = r.busy
		delay = s.Next(r.busy)
		if r.busy {
			// A full batch that was sent: more rows are probably waiting, so
			// the next claim goes at once. The article's rule waits
			// min-fixed-delay here, which caps a backlog's drain at
			// batch-size per min-fixed-delay (800 rows/s with the defaults);
			// min-fixed-delay is the floor between partial or empty polls
			// only (docs/configuration.md).
			delay = 0
		}
		p.pollDone(ctx, ec, out, r, &delay, woken)
		woken = false
	}
	defer func() {
		if flight != nil {
			settle()
		}
	}()
	for {
		if flight == nil || !flight.full {
			if flight != nil {
				settle()
			}
			w := wake
			if out.down {
				w = nil
			}
			var ok bool
			ok, woken = sleepOrWake(ctx, p.config.Clock, delay, w)
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
		b, err := p.claimBatch(ec)
		settled = false
		if flight != nil {
			// The batch before is sent and finalized before this one's send
			// starts: claim order is send order.
			settle()
		}
		if err != nil || len(b.events) == 0 {
			if settled && ec.Ordered() {
				// Claimed while the flight was in the air, when the next
				// events of its keys were not heads yet; now they are.
				delay = 0
			} else {
				delay = s.Next(false)
			}
			p.pollDone(ctx, ec, out, pollResult{err: err}, &delay, woken)
			woken = false
			if untilIdle {
				return
			}
			continue
		}
		flight = p.fly(ec, b)
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
	}
	switch {
	case r.unavailable != nil && !errors.Is(r.unavailable, errClosing):
		*delay = max(*delay, out.unavailable(r.claimed, r.unavailable))
	case r.claimed > 0:
		out.reached()
	}
	if r.err != nil && ctx.Err() == nil {
		p.logger.Error("Poll failed", r.err, watermill.LogFields{"event_type": ec.EventType, "next_delay": *delay})
	}
	p.config.Hooks.PollDone(PollInfo{EventType: ec.EventType, Claimed: r.claimed, Full: r.claimed == ec.BatchSize,
		NextDelay: *delay, Err: r.err})
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
	now := p.config.Clock.Now().UTC()
	var events []dialects.ClaimedEvent
	// Once started, the claim is not cancelled by Close: a claim that
	// committed but whose rows were never read would leave them IN_PROCESS
	// until the recovery, a needless delay. Its connection slot is waited
	// for on the same bounded context.
	claimCtx, cancel := p.finalizeCtx()
	defer cancel()
	err = p.withConn(claimCtx, func() error {
		var err error
		events, err = p.claim(claimCtx, dialects.ClaimParams{EventType: ec.EventType, Limit: ec.BatchSize, Token: token, Now: now,
			Instance: p.config.InstanceID, ByKey: ec.Ordered(), BlockOnFailure: ec.OnFailure == oncebox.OnFailureBlock})
		return err
	})
	return batch{token: token, events: events}, err
}

// flight is a claimed batch being sent and finalized.
type flight struct {
	full bool
	done chan pollResult
}

func (f *flight) wait() pollResult { return <-f.done }

// fly sends b and records the outcome in a goroutine of its own. The claim
// is committed: from here on the rows are ours until they are finalized,
// released, or recovered.
func (p *Poller) fly(ec oncebox.EventConfig, b batch) *flight {
	f := &flight{full: len(b.events) == ec.BatchSize, done: make(chan pollResult, 1)}
	go func() {
		var results []result
		if p.sendCtx.Err() != nil {
			// CloseTimeout passed while the batch before was being sent:
			// this one is released unsent.
			results = make([]result, len(b.events))
			for i := range results {
				results[i] = result{outcome: outcomeUnavailable, err: errClosing}
			}
		} else {
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
		unavailable, err := p.finalize(ec, b.token, b.events, results)
		// Ordered, any batch sent is busy: its keys' next events became
		// heads when it was finalized, and the claim that ran meanwhile
		// could not take them (docs/ordering.md, "Pacing").
		busy := f.full || ec.Ordered() && len(b.events) > 0
		f.done <- pollResult{claimed: len(b.events), busy: busy && unavailable == nil, unavailable: unavailable, err: err}
	}()
	return f
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

// finalize records the outcome of a batch: PROCESSED for the confirmed,
// the next retry (or FAILED) for the rejected, PENDING again without an
// attempt for the rest. Every statement matches the claim token. It returns
// the error that made it release events, if any.
func (p *Poller) finalize(ec oncebox.EventConfig, token oncebox.EventID, events []dialects.ClaimedEvent, results []result) (unavailable, err error) {
	defer p.claims.release()
	now := p.config.Clock.Now().UTC()
	var confirmed, released []oncebox.EventID
	var failed []dialects.FailedEvent
	var failures []Failure
	var unavailableErr error
	for i, r := range results {
		e := &events[i]
		switch r.outcome {
		case outcomeConfirmed:
			confirmed = append(confirmed, e.ID)
		case outcomeFailed:
			attempt := e.RetryCount + 1
			f := dialects.FailedEvent{ID: e.ID, RetryCount: attempt, Error: dbtext.Error(r.err)}
			final := attempt > ec.MaxRetries
			if final {
				f.Status, f.NextRetryAt = oncebox.StatusFailed, now
			} else {
				f.Status, f.NextRetryAt = oncebox.StatusPending, now.Add(ec.Backoff.RetryDelay(attempt))
			}
			failed = append(failed, f)
			failures = append(failures, Failure{ID: e.ID, Attempt: attempt, Final: final, NextRetryAt: f.NextRetryAt, Err: r.err})
		default:
			released = append(released, e.ID)
			unavailableErr = r.err
		}
	}

	var errs []error
	exec := func(q dialects.Query, want int, what string) {
		ctx, cancel := p.finalizeCtx()
		defer cancel()
		err := p.withConn(ctx, func() error {
			n, err := p.d.Exec(ctx, p.db, q)
			if err != nil {
				return err
			}
			p.staleCheck(ec, what, want, int(n))
			return nil
		})
		if err != nil {
			// The rows stay IN_PROCESS and the recovery job returns them to
			// PENDING after max-batch-processing-time: sent again, not lost.
			errs = append(errs, fmt.Errorf("oncebox: mark %d events of %q %s: %w", want, ec.EventType, what, err))
		}
	}
	if len(confirmed) > 0 {
		marked, err := p.markProcessed(ec, token, confirmed, now)
		if err != nil {
			errs = append(errs, err)
		} else if len(marked) > 0 {
			p.config.Hooks.Sent(ec.EventType, marked)
		}
	}
	if len(failed) > 0 {
		if err := p.markFailed(ec, token, failed, now); err != nil {
			errs = append(errs, err)
		}
		for _, f := range failures {
			p.logger.Error("Event send failed", f.Err, watermill.LogFields{"event_type": ec.EventType,
				"event_id": f.ID.String(), "attempt": f.Attempt, "final": f.Final, "next_retry_at": f.NextRetryAt})
			if f.Final {
				p.wakeDLQ()
			}
		}
		p.config.Hooks.SendFailed(ec.EventType, failures)
	}
	if len(released) > 0 {
		exec(p.d.EventsRelease(token, released, now), len(released), "released")
		// Logged once per outage by the poll loop; each batch at DEBUG.
		p.logger.Debug("Batch released without counting an attempt", watermill.LogFields{"event_type": ec.EventType,
			"released": len(released), "err": unavailableErr.Error()})
		p.config.Hooks.BrokerUnavailable(ec.EventType, len(released), unavailableErr)
	}
	return unavailableErr, errors.Join(errs...)
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
			n, err := p.d.Exec(ctx, p.db, p.d.EventsMarkFailed(token, fs, now))
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
