package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox/internal/clock"
)

// runner is the lifecycle of the relay and the inbox cleaner.
type runner interface {
	Run(ctx context.Context) error
	Close() error
	Running() chan struct{}
}

// Run logs the start-up checks' warnings and, when the relay's publisher
// is a BrokerChecker, returns its error if the broker refuses it (a wrong
// password: not an outage); then it runs the background work:
// the functions given to Go and, with WithRouter, the router; once the
// router runs (its handlers have subscribed, so the queues the relay
// publishes to exist), the relay (with WithRelay: its poll loops, the
// recovery, the outbox and DLQ clean-ups, and, with outbox.dlq.enabled, the
// DLQ transfer and the DLQ retry) and, with inbox.enabled, the inbox
// clean-up. It blocks until ctx is cancelled or Close is called, then stops
// them all (the router lets its handlers finish for its CloseTimeout, the
// relay its batches in flight for its CloseTimeout) and returns their
// errors, joined. If one of them stops on its own (the relay's start-up
// check failed, the router could not subscribe, a function given to Go
// returned, the inbox found Watermill's Retry inside it:
// middleware.ErrRetryInsideInbox), Run stops the others and returns its
// error; the relay does not
// start if the router stopped first. A service with nothing to run just
// waits.
//
// The lifecycle is the one of every long-running type of the module
// (docs/design.md, "Lifecycle"): Run after Close, or with ctx already done,
// returns nil at once and starts nothing (no check, no router, no
// function given to Go); Close before Run closes Running; a second Run
// returns an error; Close may be called any number of times, from any
// goroutine, and waits for Run to return.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	s.goSealed = true // Go panics from now on
	goFuncs, goNames, goStopped := s.goFuncs, s.goNames, s.goStopped
	s.mu.Unlock()
	return s.life.Run(ctx, func(ctx context.Context, markRunning func()) error {
		return s.run(ctx, markRunning, goFuncs, goNames, goStopped)
	})
}

// run is Run's work, with the functions given to Go; markRunning closes
// Running. ctx is also cancelled by Close.
func (s *Service) run(ctx context.Context, markRunning func(), goFuncs []func(context.Context) error, goNames []string,
	goStopped []chan struct{}) (err error) {
	for _, w := range s.warnings {
		// Watermill's logger has no warning level, and an ERROR line with
		// err=<nil> reads as a bug: the warning is the error.
		s.logger.Error("Start-up check", errors.New(w), nil)
	}
	if err := s.checkBroker(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	// launch runs run; group, when not nil, counts it (the functions given
	// to Go are waited for through their stopped channel instead, for at
	// most the close timeout).
	launch := func(group *sync.WaitGroup, run func(context.Context) error, stopped chan<- struct{}) {
		if group != nil {
			group.Add(1)
		}
		go func() {
			if group != nil {
				defer group.Done()
			}
			err := run(ctx)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			cancel() // one stopped: stop all
			if stopped != nil {
				close(stopped)
			}
		}()
	}
	start := func(run func(context.Context) error, stopped chan<- struct{}) { launch(&wg, run, stopped) }
	for i, fn := range goFuncs {
		launch(nil, fn, goStopped[i])
	}
	if s.inbox != nil {
		// The inbox's misuse (Retry inside it) ends the run with its error.
		start(func(ctx context.Context) error {
			select {
			case err := <-s.misuse:
				return fmt.Errorf("oncebox: service: inbox: %w", err)
			case <-ctx.Done():
				return nil
			}
		}, nil)
	}
	routerStopped := make(chan struct{})
	if s.router != nil {
		if s.onHandlers != nil {
			s.onHandlers(slices.Sorted(maps.Keys(s.router.Handlers())))
		}
		start(s.runRouter, routerStopped)
		// The relay waits for the subscriptions: a message the relay sends
		// to a RabbitMQ queue that no subscriber has declared yet is
		// dropped by the exchange, and the event is PROCESSED all the same.
		select {
		case <-s.router.Running():
		case <-routerStopped: // it failed to start: cancel was called
		case <-ctx.Done():
		}
	}
	if ctx.Err() == nil {
		s.startRunners(ctx, start, &wg, markRunning)
	}
	<-ctx.Done()
	if s.router != nil {
		// A running router without handlers ignores its context: close it.
		// One whose Run failed is not closed: Watermill's Close would wait
		// its whole CloseTimeout for the handlers that never started.
		select {
		case <-s.router.Running():
			if err := s.router.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("oncebox: service: closing the router: %w", err))
				mu.Unlock()
			}
		case <-routerStopped:
		}
	}
	wg.Wait()
	stuck := s.waitGoFuncs(goStopped, goNames)
	mu.Lock()
	// A function given to Go that is still running may yet append to errs:
	// join a copy.
	err = errors.Join(append(append([]error(nil), errs...), stuck)...)
	mu.Unlock()
	s.closeErr = stuck
	return err
}

// waitGoFuncs waits, for at most the close timeout on the service's clock,
// for the functions given to Go to return (their contexts are cancelled),
// and returns an error naming those still running then; nil if none.
func (s *Service) waitGoFuncs(stopped []chan struct{}, names []string) error {
	var timer clock.Timer
	for i, done := range stopped {
		select {
		case <-done:
			continue
		default:
		}
		if timer == nil {
			timer = clock.NewTimer(s.clock, s.closeTimeout)
			defer timer.Stop()
		}
		select {
		case <-done:
			continue
		case <-timer.Chan():
		}
		var left []string
		for j := i; j < len(stopped); j++ {
			select {
			case <-stopped[j]:
			default:
				left = append(left, names[j])
			}
		}
		if len(left) == 0 {
			return nil
		}
		return fmt.Errorf("oncebox: service: %s did not return within %s (WithCloseTimeout) after its context was cancelled: "+
			"a function given to Go must return once its ctx is done; it is left running", strings.Join(left, ", "), s.closeTimeout)
	}
	return nil
}

// BrokerChecker is an optional extension of the publisher given to
// WithRelay: Run calls CheckBroker before it starts anything, and fails
// with its error. CheckBroker returns an error when the broker refuses the
// publisher (a wrong password, no permission: trying later does not help),
// and nil when it accepts it or cannot be reached now (an outage, which
// the relay waits out). The rabbitmq package's Publisher implements it.
type BrokerChecker interface {
	CheckBroker(ctx context.Context) error
}

// checkBroker runs the relay publisher's CheckBroker, if it has one, until
// ctx (Run's, which Close cancels) stops it.
func (s *Service) checkBroker(ctx context.Context) error {
	bc, ok := s.relayPub.(BrokerChecker)
	if !ok {
		return nil
	}
	if err := bc.CheckBroker(ctx); err != nil {
		return fmt.Errorf("oncebox: service: the relay's broker refused it at start (WithRelay's %T): %w", s.relayPub, err)
	}
	return nil
}

// startRunners starts the relay and the inbox cleaner with start, and marks
// the service running once they all run.
func (s *Service) startRunners(ctx context.Context, start func(func(context.Context) error, chan<- struct{}), wg *sync.WaitGroup,
	markRunning func()) {
	var runners []runner
	if s.relay != nil {
		runners = append(runners, s.relay)
	}
	if s.cleaner != nil {
		runners = append(runners, s.cleaner)
	}
	returned := make([]chan struct{}, len(runners))
	for i, r := range runners {
		returned[i] = make(chan struct{})
		start(r.Run, returned[i])
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Each runner's Running is closed once it runs or has returned.
		for _, r := range runners {
			<-r.Running()
		}
		markRunning()
		// A runner that failed at start (the relay's start-up check) closed
		// its Running too: no "Service running" then. Its StartErr is set
		// before its Running is closed, so the check cannot miss it (Run's
		// return, the returned channels, comes later).
		if ctx.Err() != nil {
			return
		}
		for _, r := range runners {
			if se, ok := r.(interface{ StartErr() error }); ok && se.StartErr() != nil {
				return
			}
		}
		for _, ch := range returned {
			select {
			case <-ch:
				return
			default:
			}
		}
		s.logger.Info("Service running", watermill.LogFields{"relay": s.relay != nil, "inbox": s.inbox != nil,
			"router": s.router != nil, "database": s.dialect.Name(), "outbox": s.dialect.Tables().Events})
	}()
}

// Running is closed once Run has started everything, or has returned (an
// error at start, a context done at start), or Close was called before
// Run: `go svc.Run(ctx); <-svc.Running()` never hangs.
func (s *Service) Running() chan struct{} { return s.life.Running() }

// Close stops Run (see Run) and waits for it to return. It is safe to call
// more than once, from any goroutine, and before Run, which then returns at
// once. Run closes the router of WithRouter if it ran it (a router Run
// never ran holds no subscription and is left as it is); Close closes
// neither the database nor the relay's publisher. Its error names the
// functions given to Go that did not return within the close timeout
// (WithCloseTimeout); Run's other errors are Run's.
func (s *Service) Close() error {
	s.life.Close()
	// closeErr is written by Run before it returns, and life.Close has
	// waited for that; before Run, Run will not write it.
	return s.closeErr
}
