package poller_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// `go p.Run(ctx); <-p.Running()` must never hang, however Run ends; the
// lifecycle is the one of every long-running type (internal/lifecycle).
func TestRunningIsClosedWhenRunReturnsEarly(t *testing.T) {
	t.Parallel()
	t.Run("Close before Run", func(t *testing.T) {
		t.Parallel()
		// Not migrated: a Run that checked the schema would fail.
		s := pgtest.NewEmptySchema(t)
		p, err := poller.New(s.Beginner, newRecorder(), poller.Config{Dialect: s.Dialect}, nil)
		require.NoError(t, err)
		require.NoError(t, p.Close())
		<-p.Running() // closed by Close already
		require.NoError(t, p.Run(context.Background()), "Run after Close returns nil at once, without the start-up check")
		require.NoError(t, p.StartErr())
		require.NoError(t, p.Close(), "Close after Close")
		require.ErrorContains(t, p.Run(context.Background()), "oncebox: poller: Run called twice")
	})
	t.Run("context done at start", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewEmptySchema(t)
		p, err := poller.New(s.Beginner, newRecorder(), poller.Config{Dialect: s.Dialect}, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, p.Run(ctx), "nil at once, without the start-up check")
		<-p.Running()
		require.NoError(t, p.StartErr())
		require.NoError(t, p.Close())
	})
	t.Run("schema not migrated", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewEmptySchema(t)
		p, err := poller.New(s.Beginner, newRecorder(), poller.Config{Dialect: s.Dialect}, nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		require.ErrorContains(t, p.StartErr(), "poller cannot start")
		require.ErrorContains(t, <-errc, "poller cannot start")
		require.NoError(t, p.Close())
	})
	t.Run("Run twice, Close from many goroutines", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := poller.New(b.schema.Beginner, newRecorder(), b.config("order-created"), nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		require.NoError(t, p.StartErr())
		require.ErrorContains(t, p.Run(context.Background()), "oncebox: poller: Run called twice")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { require.NoError(t, p.Close()) })
		}
		wg.Wait()
		require.NoError(t, <-errc)
	})
}
