package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/lease"
	"github.com/oncebox/watermill-oncebox/internal/lifecycle"
)

// Poller relays outbox rows to a broker. Build it with New, start it with
// Run, stop it with Close. Its Run/Close/Running answer as every
// long-running type's (docs/design.md, "Lifecycle"): Run after Close or
// with a done context returns nil at once, Close before Run closes
// Running, a second Run is an error, Close may be called again and from
// any goroutine.
type Poller struct {
	db     wsql.Beginner
	logger watermill.LoggerAdapter
	config Config
	events []oncebox.EventConfig
	d      dialects.Relay // the dialect's relay role; config.Dialect for the rest
	locker *lease.Locker

	conns  *conns  // the database and the MaxConcurrentQueries slots
	stages *stages // claim, send, finalize: shared by every type's loop and Drain (loop.go)
	keeper *keeper // heartbeat, recovery, clock check (heartbeat.go)

	listener Listener   // nil: polling only (wake.go)
	wakes    *wakeBoard // routes wake-ups to the loops

	dlqWake chan struct{}        // a poll marked rows FAILED
	life    *lifecycle.Lifecycle // Run, Close, Running (internal/lifecycle)
	closing <-chan struct{}      // life.Closing(): closed by Close
	claims  *claims              // batches in flight, for the heartbeat (heartbeat.go)

	// dlqRetryMaxSet: Config.DLQRetry.Max was given, not defaulted
	// (dlqRetrySchedule).
	dlqRetryMaxSet bool
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
	config = config.withDefaults()
	events, err := config.validate()
	if err != nil {
		return nil, err
	}
	if config.Oncebox.Outbox.Finalize == oncebox.FinalizeDelete {
		// outbox.finalize: delete. The copy differs only in MarkProcessed
		// (and MarkProcessedClaims): every stage finalizes through it.
		cd, ok := config.Dialect.(dialects.ConfirmedDeleter)
		if !ok {
			return nil, fmt.Errorf("%w: outbox.finalize: %q: the %s dialect cannot delete at finalize (dialects.ConfirmedDeleter)",
				oncebox.ErrInvalidConfig, oncebox.FinalizeDelete, config.Dialect.Name())
		}
		config.Dialect = cd.DeleteConfirmed()
	}
	if err := checkSendTimeout(publisherOut, config.Oncebox.Outbox.MaxBatchProcessingTime); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	p := &Poller{
		db:      db,
		logger:  logger.With(watermill.LogFields{"component": "oncebox-poller", "instance": config.InstanceID}),
		config:  config,
		events:  events,
		d:       config.Dialect,
		locker:  lease.NewLocker(db, config.Dialect, config.InstanceID, config.Clock),
		dlqWake: make(chan struct{}, 1),
		life:    lifecycle.New("poller"),
		claims:  newClaims(),

		dlqRetryMaxSet: dlqRetryMaxSet,
	}
	p.closing = p.life.Closing()
	p.conns = &conns{db: db, d: config.Dialect, sem: make(chan struct{}, config.MaxConcurrentQueries), finalize: config.FinalizeTimeout}
	p.listener, p.wakes = wakeOnCommit(config, db, events)
	p.stages = &stages{
		claimer: &claimer{conns: p.conns, clock: config.Clock, instance: config.InstanceID, pub: publisherOut, claims: p.claims},
		sender: &sender{pub: publisherOut, clock: config.Clock, isUnavailable: config.IsUnavailable,
			mbpt: config.Oncebox.Outbox.MaxBatchProcessingTime, tracer: config.TracerProvider.Tracer(tracerName), propagator: config.Propagator},
		fin:    &finalizer{conns: p.conns, clock: config.Clock, logger: p.logger, hooks: config.Hooks, claims: p.claims, dlqWake: p.dlqWake},
		config: config, pub: publisherOut, logger: p.logger, wakes: p.wakes,
	}
	p.keeper = &keeper{config: config, conns: p.conns, logger: p.logger, claims: p.claims, wakes: p.wakes, jobDone: p.jobDone}
	warnIfKeysDropped(publisherOut, p.logger)
	return p, nil
}

// Running is closed once Run has started every poll loop and job, or has
// returned (an error at start, a context done at start), or Close was
// called before Run: StartErr then says which.
func (p *Poller) Running() chan struct{} { return p.life.Running() }

// StartErr returns, once Running is closed, the error with which Run
// returned without starting (the start-up checks failed), or nil when the
// relay runs or was stopped before it started. Read after <-Running(), it
// cannot miss Run's fail-fast error, which a select on Run's result after
// <-Running() can (Running is closed before Run's caller receives it):
//
//	go func() { done <- relay.Run(ctx) }()
//	<-relay.Running()
//	if err := relay.StartErr(); err != nil { … }
func (p *Poller) StartErr() error { return p.life.StartErr() }

// Run checks that the database can serve the relay (Dialect.CheckSchema:
// reachable, migrated, a MySQL DSN with parseTime) and that the relay's
// clock is within Config.MaxClockOffset of the database's, and returns an
// error if not; then it starts the poll loops and the jobs and blocks until ctx is
// cancelled or Close is called; then it stops claiming, lets batches in flight finish for
// up to CloseTimeout, releases what is left and returns. It returns nil on a
// clean stop.
//
// The lifecycle is the one of every long-running type of the module
// (docs/design.md, "Lifecycle"): Run after Close, or with ctx already done,
// returns nil at once without checking or claiming anything; Close before
// Run closes Running; a second Run returns an error; Close may be called
// any number of times, from any goroutine, and waits for Run to return.
func (p *Poller) Run(ctx context.Context) error {
	return p.life.Run(ctx, p.run)
}

// run is Run's work; markRunning closes Running.
func (p *Poller) run(ctx context.Context, markRunning func()) (err error) {
	// Fail fast: a database that cannot serve the relay (not reachable, not
	// migrated, a MySQL DSN without parseTime) is an error from Run, not a
	// failure logged by every poll forever. Later failures are retried.
	checkCtx, cancelCheck := p.conns.finalizeCtx()
	err = p.withConn(checkCtx, func() error {
		if err := p.config.Dialect.CheckSchema(checkCtx, p.db); err != nil {
			return err
		}
		return p.keeper.clockAtStart(checkCtx) // clockcheck.go
	})
	cancelCheck()
	if err != nil {
		return fmt.Errorf("oncebox: poller cannot start: %w", err)
	}

	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSends()

	var wg sync.WaitGroup
	goLoop := func(f func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(loopCtx)
		}()
	}
	for _, ec := range p.events {
		goLoop(func(ctx context.Context) { p.stages.newLoop(sendCtx, ec, false).run(ctx) })
	}
	if !p.config.Oncebox.Outbox.StrictEventTypes {
		d := newDiscovery(p.config, p.events, p.conns, p.logger, p.wakes, func(ctx context.Context, ec oncebox.EventConfig) bool {
			return p.stages.newLoop(sendCtx, ec, true).run(ctx)
		})
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
		p.keeper.keepLoop(loopCtx, beatCtx)
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
// call more than once, from any goroutine, and before Run. It returns nil.
func (p *Poller) Close() error {
	p.life.Close()
	return nil
}

// withConn runs f while holding one of the MaxConcurrentQueries slots.
func (p *Poller) withConn(ctx context.Context, f func() error) error { return p.conns.with(ctx, f) }

// closing reports whether err is only the end of ctx, the poller's run:
// a statement that waited for a connection slot while the poller closed.
// Hooks and logs do not report it as a failure.
func closing(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
