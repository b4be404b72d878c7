package middleware_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestNewInboxCleanerValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := middleware.NewInboxCleaner(nil, middleware.InboxCleanerConfig{}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "db is nil")
	_, err = middleware.NewInboxCleaner(b.schema.Beginner, middleware.InboxCleanerConfig{Dialect: b.schema.Dialect,
		CleanUp: oncebox.CleanUpConfig{TTL: -time.Hour}}, nil)
	require.ErrorContains(t, err, "inbox.clean-up.ttl must be > 0")
}

// `go c.Run(ctx); <-c.Running()` must never hang, and a cleaner closed before
// it ran, or run with a context already done, does no work: Run returns nil
// at once, as the poller's and the service's do (internal/lifecycle).
func TestInboxCleanerLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	newCleaner := func(t *testing.T, runs *atomic.Int64) *middleware.InboxCleaner {
		c, err := middleware.NewInboxCleaner(b.schema.Beginner, middleware.InboxCleanerConfig{Dialect: b.schema.Dialect,
			OnRun: func(middleware.JobResult) { runs.Add(1) }}, nil)
		require.NoError(t, err)
		return c
	}
	t.Run("Close before Run", func(t *testing.T) {
		var runs atomic.Int64
		c := newCleaner(t, &runs)
		require.NoError(t, c.Close())
		<-c.Running() // closed by Close already
		require.NoError(t, c.Run(context.Background()), "Run after Close returns nil at once")
		require.Zero(t, runs.Load())
		require.NoError(t, c.Close(), "Close after Close")
		require.ErrorContains(t, c.Run(context.Background()), "oncebox: inbox cleaner: Run called twice")
	})
	t.Run("context done at start", func(t *testing.T) {
		var runs atomic.Int64
		c := newCleaner(t, &runs)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, c.Run(ctx))
		<-c.Running()
		require.Zero(t, runs.Load())
		require.NoError(t, c.Close())
	})
	t.Run("Run twice, Close from many goroutines", func(t *testing.T) {
		var runs atomic.Int64
		c := newCleaner(t, &runs)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background()) }()
		<-c.Running()
		require.ErrorContains(t, c.Run(context.Background()), "oncebox: inbox cleaner: Run called twice")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { require.NoError(t, c.Close()) })
		}
		wg.Wait()
		require.NoError(t, <-errc)
	})
	t.Run("Close while Run starts", func(t *testing.T) {
		var runs atomic.Int64
		c := newCleaner(t, &runs)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background()) }()
		require.NoError(t, c.Close())
		<-c.Running()
		require.NoError(t, <-errc)
	})
}
