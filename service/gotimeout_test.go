package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/service"
)

// stuckServer's Serve, given to Go, ignores its context.
type stuckServer struct{ release <-chan struct{} }

func (s stuckServer) Serve(context.Context) error {
	<-s.release
	return nil
}

// A function given to Go that ignores its context no longer makes Close
// wait for ever: after the close timeout (the router's default, 30 s, on
// the service's clock) Close and Run return an error naming it. A function
// that returns in time is waited for.
func TestCloseGivesUpOnAGoFunctionThatIgnoresItsContext(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // the leak check of TestMain
	svc := b.newService(t, config(t, relayYAML, b.schema))
	svc.Go(func(ctx context.Context) error { <-ctx.Done(); return nil })
	svc.Go(stuckServer{release}.Serve)
	errc := runAsync(context.Background(), svc)
	<-svc.Running()

	closed := make(chan error, 1)
	go func() { closed <- svc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 1), "Close waits on the service's clock")
	// The well-behaved function returns once its context is cancelled;
	// Run must have counted it before the timeout fires, or the error
	// would rightly name it too.
	select {
	case <-service.GoStopped(svc, 0):
	case <-ctx.Done():
		t.Fatal("Go #1 did not return after its context was cancelled")
	}
	b.clock.Advance(service.DefaultCloseTimeout - time.Nanosecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned before the timeout: %v", err)
	default:
	}
	b.clock.Advance(time.Nanosecond)
	var err error
	select {
	case err = <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return after the close timeout")
	}
	require.ErrorContains(t, err, "Go #2 (service_test.stuckServer.Serve)")
	require.ErrorContains(t, err, "did not return within 30s")
	require.NotContains(t, err.Error(), "Go #1")
	require.ErrorContains(t, returned(t, errc), err.Error(), "Run returns it too")
}

// WithCloseTimeout sets the wait; a negative one is refused, naming the
// option.
func TestWithCloseTimeout(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	_, err := service.New(b.Beginner, config(t, relayYAML, b.schema), nil, service.WithCloseTimeout(-time.Second))
	require.ErrorContains(t, err, "WithCloseTimeout: must be positive (or 0 for the default, 30s), got -1s")

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	svc := b.newService(t, config(t, relayYAML, b.schema), service.WithCloseTimeout(time.Second))
	svc.Go(stuckServer{release}.Serve)
	errc := runAsync(context.Background(), svc)
	<-svc.Running()
	closed := make(chan error, 1)
	go func() { closed <- svc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 1))
	b.clock.Advance(time.Second)
	select {
	case err = <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return after the close timeout")
	}
	require.ErrorContains(t, err, "Go #1 (service_test.stuckServer.Serve) did not return within 1s")
	require.Error(t, returned(t, errc))
}
