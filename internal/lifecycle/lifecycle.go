// Package lifecycle is the Run/Close/Running bookkeeping shared by every
// long-running type of the module (poller.Poller, middleware.InboxCleaner,
// service.Service), so that they all answer the same way to the same
// sequence of calls:
//
//   - Run blocks until its context is cancelled or Close is called, and
//     returns nil on such a clean stop.
//   - Run after Close, or with a context already done, returns nil at once
//     and does no work (no start-up check, no query): the caller asked it
//     to stop before it started. This is what Watermill's Router does
//     (its Run after Close stops at once and returns nil), and it keeps
//     `go c.Run(ctx); c.Close()` returning nil however the two race.
//   - Close before Run returns nil at once and closes Running, so that
//     `<-c.Running()` never hangs, whether Run is called later or never.
//   - Run twice returns an error ("oncebox: <name>: Run called twice"),
//     also after Close: the second call is a bug in the caller.
//   - Close is safe to call more than once and from many goroutines at
//     once: every call waits until Run has returned.
//   - Running is closed once Run has started its work, or has returned
//     (an error at start, Close first, a context done at start): it never
//     stays open on a Run that ended.
package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Lifecycle holds one component's Run/Close/Running state. Its zero value
// is not usable: build it with New.
type Lifecycle struct {
	name        string
	running     chan struct{} // closed by markRunning
	runningOnce sync.Once
	closing     context.Context // done once Close is called
	close       context.CancelFunc
	done        chan struct{} // closed when Run has returned
	startErr    error         // Run's error when it returned before running; set before running is closed

	mu      sync.Mutex
	started bool
}

// New returns the lifecycle of the component called name in errors
// ("poller", "inbox cleaner", "service").
func New(name string) *Lifecycle {
	closing, close := context.WithCancel(context.Background())
	return &Lifecycle{name: name, running: make(chan struct{}), closing: closing, close: close, done: make(chan struct{})}
}

// Run runs body as the component's Run (see the package comment for what
// each sequence of calls does). body's context is ctx, also cancelled by
// Close; body calls running once it has started its work, which closes
// Running. If body returns without calling running, Running is closed
// then and its error is kept for StartErr.
func (l *Lifecycle) Run(ctx context.Context, body func(ctx context.Context, running func()) error) (err error) {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return fmt.Errorf("oncebox: %s: Run called twice", l.name)
	}
	l.started = true
	l.mu.Unlock()
	defer close(l.done)
	defer func() {
		l.runningOnce.Do(func() {
			l.startErr = err // Run returns before it ran: StartErr says why
			close(l.running)
		})
	}()
	select {
	case <-l.closing.Done():
		return nil
	case <-ctx.Done():
		return nil
	default:
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.closing, cancel)
	defer stop()
	return body(ctx, l.markRunning)
}

func (l *Lifecycle) markRunning() { l.runningOnce.Do(func() { close(l.running) }) }

// Running is closed once Run has started its work, or has returned, or
// Close was called before Run.
func (l *Lifecycle) Running() chan struct{} { return l.running }

// Closing is closed when Close is called.
func (l *Lifecycle) Closing() <-chan struct{} { return l.closing.Done() }

// StartErr returns, once Running is closed, the error with which Run
// returned before it started its work, or nil (it runs, or it was asked to
// stop first).
func (l *Lifecycle) StartErr() error {
	select {
	case <-l.running:
		return l.startErr
	default:
		return nil
	}
}

// Close asks Run to stop and waits for it to return. Before Run it closes
// Running and returns at once; a later Run returns nil at once.
func (l *Lifecycle) Close() {
	l.close()
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	if !started {
		// Run, if it comes, sees closing and returns at once. startErr
		// stays nil: Close first is not a failure to start.
		l.markRunning()
		return
	}
	<-l.done
}
