package service

import (
	"context"
	"errors"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
)

// runner is the lifecycle of the relay and the inbox cleaner.
type runner interface {
	Run(ctx context.Context) error
	Close() error
	Running() chan struct{}
}

// Run logs the start-up checks' warnings, then runs the background work:
// the relay (with WithRelay: its poll loops, the recovery, the outbox and
// DLQ clean-ups, and, with outbox.dlq.enabled, the DLQ transfer and the DLQ
// retry) and, with inbox.enabled, the inbox clean-up. It blocks until ctx
// is cancelled or Close is called, then stops them all (the relay lets its
// batches in flight finish for its CloseTimeout) and returns their errors.
// If one of them stops on its own (the relay's start-up check failed), Run
// stops the others and returns its error. A service with nothing to run
// (no relay, no inbox) just waits. Run may be called once; after Close it
// returns nil at once.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("oncebox: service: Run called twice")
	}
	s.started = true
	s.mu.Unlock()
	defer close(s.done)
	defer s.markRunning()
	select {
	case <-s.closing:
		return nil
	default:
	}
	for _, w := range s.warnings {
		// Watermill's logger has no warning level: an error without an
		// error value is how its adapters print one.
		s.logger.Error("Start-up check: "+w, nil, nil)
	}
	var runners []runner
	if s.relay != nil {
		runners = append(runners, s.relay)
	}
	if s.cleaner != nil {
		runners = append(runners, s.cleaner)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Run(ctx)
			cancel() // one stopped: stop all
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Each runner's Running is closed once it runs or has returned.
		for _, r := range runners {
			<-r.Running()
		}
		s.markRunning()
		s.logger.Info("Service running", watermill.LogFields{"relay": s.relay != nil, "inbox": s.inbox != nil,
			"database": s.dialect.Name(), "outbox": s.dialect.Tables().Events})
	}()
	select {
	case <-ctx.Done():
	case <-s.closing:
	}
	cancel()
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Service) markRunning() { s.runningOnce.Do(func() { close(s.running) }) }

// Running is closed once Run has started everything, or has returned (an
// error at start, or Close first): `go svc.Run(ctx); <-svc.Running()` never
// hangs.
func (s *Service) Running() chan struct{} { return s.running }

// Close stops Run (see Run) and waits for it to return. It is safe to call
// more than once, from any goroutine, and before Run, which then returns at
// once. It closes neither the database nor the relay's publisher.
func (s *Service) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		s.markRunning()
		return nil
	}
	<-s.done
	return nil
}
