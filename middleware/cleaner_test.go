package middleware_test

import (
	"context"
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
// it ran does no work: Run returns ErrClosed at once, as the poller's does.
func TestInboxCleanerClosedBeforeRunReturnsErrClosedAndRunningIsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs := 0
	c, err := middleware.NewInboxCleaner(b.schema.Beginner, middleware.InboxCleanerConfig{Dialect: b.schema.Dialect,
		OnRun: func(middleware.JobResult) { runs++ }}, nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()) }()
	<-c.Running()
	require.ErrorIs(t, <-errc, oncebox.ErrClosed)
	require.Zero(t, runs)
	require.NoError(t, c.Close(), "Close after Close")
	require.ErrorContains(t, c.Run(context.Background()), "Run called twice")
}
