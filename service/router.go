package service

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
)

// WithRouter hands the router to the service: Run runs it, starts the relay
// only once the router runs (its handlers have subscribed, so the queues
// the relay publishes to exist), and stops the service if the router stops
// (Run returns its error); Run closes it when the service stops (Close,
// ctx). The router is the caller's to build: add its handlers and
// middlewares, svc.Middleware among them, before Run, and do not run it
// yourself. Closing it yourself (as Watermill's SignalsHandler plugin does)
// stops the service.
func WithRouter(r *message.Router) Option {
	return func(o *options) { o.router, o.routerGiven = r, true }
}

// Go runs fn in Run under the service's lifecycle, as errgroup.Group.Go
// does: fn starts with Run, and its ctx is cancelled when Run's is, when
// Close is called or when another component stops; when fn returns, the
// service stops and Run returns fn's error with the others'. fn must block
// until ctx is done: an HTTP server's Serve, with
// context.AfterFunc(ctx, …) closing the server. It must return once ctx is
// done: Run waits for it for the close timeout (WithCloseTimeout), then
// returns, and Close with it, an error naming it ("Go #1 (main.serve)":
// its rank among the calls of Go and its function's name). Call Go before Run; a call after Run has
// started, or with a nil fn, is a programming error and panics (as adding a
// router handler twice does in Watermill).
func (s *Service) Go(fn func(ctx context.Context) error) {
	if fn == nil {
		panic("oncebox: service: Go: fn is nil")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goSealed {
		panic("oncebox: service: Go called after Run")
	}
	s.goFuncs = append(s.goFuncs, fn)
	s.goStopped = append(s.goStopped, make(chan struct{}))
	s.goNames = append(s.goNames, fmt.Sprintf("Go #%d (%s)", len(s.goFuncs), funcName(fn)))
}

// funcName is fn's name without its package path ("main.serveAdmin",
// "main.(*server).Serve", "main.main.func1" for a closure), or "?" when
// the runtime does not know it.
func funcName(fn func(context.Context) error) string {
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	if f == nil {
		return "?"
	}
	name := strings.TrimSuffix(f.Name(), "-fm") // a method value's
	return name[strings.LastIndex(name, "/")+1:]
}

func (s *Service) runRouter(ctx context.Context) error {
	if err := s.router.Run(ctx); err != nil {
		return fmt.Errorf("oncebox: service: router: %w", err)
	}
	return nil
}
