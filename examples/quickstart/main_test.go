package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The demo is part of the test suite so that `make demo` keeps working: a
// small run must end with nothing lost, doubled or delivered from a rollback.
func TestDemoEndsClean(t *testing.T) {
	dsn := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	ok, err := run(context.Background(), options{dsn: dsn, orders: 60, rollbackEvery: 5, stuck: 5, duplicates: 10,
		timeout: 60 * time.Second})
	require.NoError(t, err)
	require.True(t, ok, "the demo's summary reports a loss, a double or a phantom")
}
