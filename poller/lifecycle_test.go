package poller_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// `go p.Run(ctx); <-p.Running()` must never hang, however Run ends.
func TestRunningIsClosedWhenRunReturnsEarly(t *testing.T) {
	t.Parallel()
	t.Run("Close before Run", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := poller.New(b.schema.Beginner, newRecorder(), b.config("order-created"), nil)
		require.NoError(t, err)
		require.NoError(t, p.Close())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		require.ErrorIs(t, <-errc, oncebox.ErrClosed)
	})
	t.Run("schema not migrated", func(t *testing.T) {
		t.Parallel()
		s := pgtest.NewEmptySchema(t)
		p, err := poller.New(s.Beginner, newRecorder(), poller.Config{Dialect: s.Dialect}, nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		require.ErrorContains(t, <-errc, "poller cannot start")
		require.NoError(t, p.Close())
	})
}
