package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// postgresDSN is the database the tests run on: $ONCEBOX_TEST_POSTGRES_DSN
// or the local PostgreSQL. Each run creates and drops a schema of its own.
func postgresDSN() string {
	if dsn := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://root@127.0.0.1:5432/test?sslmode=disable"
}

// The example is part of the test suite so that the guide's code keeps
// working: a short run with rolled-back transactions must deliver every
// committed lottery exactly once and nothing else.
func TestLotteryEndsClean(t *testing.T) {
	s, err := run(context.Background(), options{dsn: postgresDSN(), config: "oncebox.yaml",
		duration: 2 * time.Second, interval: 20 * time.Millisecond, errorProbability: 0.3, drainTimeout: 15 * time.Second})
	require.NoError(t, err)
	t.Log(s)
	require.Positive(t, s.Published)
	require.Positive(t, s.RolledBack, "the run must roll some lotteries back to show that their events are not sent")
	require.Equal(t, s.Published, s.Delivered)
	require.Zero(t, s.Lost)
	require.Zero(t, s.Doubled)
	require.Zero(t, s.Phantom)
	require.True(t, s.OK())
	require.True(t, strings.HasPrefix(s.String(), "lottery: published="), s.String())
}

// A missing configuration is an error naming the file, not a nil-pointer
// panic later (issue 13).
func TestMissingConfigIsAnError(t *testing.T) {
	_, err := run(context.Background(), options{dsn: postgresDSN(), config: "testdata/missing.yaml", duration: time.Second, interval: time.Second})
	require.ErrorContains(t, err, "testdata/missing.yaml")
}
