package poller_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Run's fail-fast error is seen by StartErr as soon as Running is closed,
// every time: a select on Run's result after <-Running() misses it in a
// run out of hundreds (Running is closed before Run's caller receives the
// error), which is how the migration guide's relay once started on an
// unmigrated schema without a word.
func TestStartErrIsSetWhenRunningClosesOnAFailedStart(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "postgres").NewEmpty(t) // not migrated
	for range 20 {
		p, err := poller.New(env.Beginner, newRecorder(), poller.Config{Dialect: env.Dialect}, nil)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		<-p.Running()
		startErr := p.StartErr()
		require.Error(t, startErr, "StartErr is set before Running is closed")
		require.Equal(t, startErr, <-done)
		require.NoError(t, p.Close())
	}
}

func TestStartErrIsNilWhileTheRelayRuns(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "postgres").New(t)
	p, err := poller.New(env.Beginner, newRecorder(), poller.Config{Dialect: env.Dialect}, nil)
	require.NoError(t, err)
	require.NoError(t, p.StartErr(), "not started yet")
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	<-p.Running()
	require.NoError(t, p.StartErr())
	require.NoError(t, p.Close())
	require.NoError(t, <-done)
}
