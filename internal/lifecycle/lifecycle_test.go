package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox/internal/lifecycle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// body runs until its context ends and counts its runs.
type body struct {
	mu   sync.Mutex
	runs int
}

func (b *body) run(ctx context.Context, running func()) error {
	b.mu.Lock()
	b.runs++
	b.mu.Unlock()
	running()
	<-ctx.Done()
	return nil
}

func (b *body) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs
}

func closed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never closed", what)
	}
}

func TestLifecycle(t *testing.T) {
	t.Run("Run then Close", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l, b := lifecycle.New("thing"), &body{}
		errc := make(chan error, 1)
		go func() { errc <- l.Run(context.Background(), b.run) }()
		closed(t, l.Running(), "Running")
		l.Close()
		require.NoError(t, <-errc)
		require.Equal(t, 1, b.count())
		require.NoError(t, l.StartErr())
	})
	t.Run("Run after Close returns nil at once and does no work", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l, b := lifecycle.New("thing"), &body{}
		l.Close()
		closed(t, l.Running(), "Running after Close before Run")
		require.NoError(t, l.Run(context.Background(), b.run))
		require.Zero(t, b.count())
		require.NoError(t, l.StartErr())
	})
	t.Run("Run with a context done returns nil at once and does no work", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l, b := lifecycle.New("thing"), &body{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, l.Run(ctx, b.run))
		require.Zero(t, b.count())
		closed(t, l.Running(), "Running")
		l.Close()
	})
	t.Run("Run twice", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l, b := lifecycle.New("thing"), &body{}
		errc := make(chan error, 1)
		go func() { errc <- l.Run(context.Background(), b.run) }()
		closed(t, l.Running(), "Running")
		require.EqualError(t, l.Run(context.Background(), b.run), "oncebox: thing: Run called twice")
		l.Close()
		require.NoError(t, <-errc)
		require.EqualError(t, l.Run(context.Background(), b.run), "oncebox: thing: Run called twice", "also after Close")
		require.Equal(t, 1, b.count())
	})
	t.Run("Close many times from many goroutines waits for Run", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l := lifecycle.New("thing")
		release := make(chan struct{})
		var returned sync.WaitGroup
		returned.Add(1)
		go func() {
			defer returned.Done()
			_ = l.Run(context.Background(), func(ctx context.Context, running func()) error {
				running()
				<-ctx.Done()
				<-release // a slow stop
				return nil
			})
		}()
		closed(t, l.Running(), "Running")
		closes := make(chan struct{}, 4)
		for range 4 {
			go func() { l.Close(); closes <- struct{}{} }()
		}
		select {
		case <-closes:
			t.Fatal("Close returned before Run")
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		for range 4 {
			<-closes
		}
		returned.Wait()
		l.Close()
	})
	t.Run("an error before running closes Running and is StartErr", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l := lifecycle.New("thing")
		boom := errors.New("boom")
		require.ErrorIs(t, l.Run(context.Background(), func(context.Context, func()) error { return boom }), boom)
		closed(t, l.Running(), "Running")
		require.ErrorIs(t, l.StartErr(), boom)
		l.Close()
	})
	t.Run("an error after running is not StartErr", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		l := lifecycle.New("thing")
		boom := errors.New("boom")
		require.ErrorIs(t, l.Run(context.Background(), func(_ context.Context, running func()) error { running(); return boom }), boom)
		require.NoError(t, l.StartErr())
	})
	t.Run("Close while Run starts", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		for range 100 {
			l, b := lifecycle.New("thing"), &body{}
			errc := make(chan error, 1)
			go func() { errc <- l.Run(context.Background(), b.run) }()
			l.Close()
			closed(t, l.Running(), "Running")
			require.NoError(t, <-errc)
		}
	})
	t.Run("StartErr before Running is nil", func(t *testing.T) {
		require.NoError(t, lifecycle.New("thing").StartErr())
	})
}
