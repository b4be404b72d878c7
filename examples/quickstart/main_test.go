package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The demo is part of the test suite so that `make demo` keeps working: a
// small run must end with nothing lost, doubled or delivered from a
// rollback, on the embedded default (SQLite in a temporary file) and on
// each server DATABASE_URL may name.
func TestDemoEndsClean(t *testing.T) {
	pg := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN")
	if pg == "" {
		pg = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	for _, tc := range []struct{ name, dsn string }{
		{"sqlite", ""},
		{"postgres", pg},
		{"mysql", "mysql://root@127.0.0.1:3306/test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := run(context.Background(), options{dsn: tc.dsn, orders: 60, rollbackEvery: 5, stuck: 5, duplicates: 10,
				timeout: 60 * time.Second})
			require.NoError(t, err)
			require.True(t, ok, "the demo's summary reports a loss, a double or a phantom")
		})
	}
}

// TestMain runs the demo's main when the test binary is started as the demo
// (TestDemoWithoutDatabaseURLOpensNoConnectionToPostgreSQL).
func TestMain(m *testing.M) {
	if os.Getenv("ONCEBOX_QUICKSTART_MAIN") == "1" {
		os.Args = append([]string{os.Args[0]}, strings.Fields(os.Getenv("ONCEBOX_QUICKSTART_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Without DATABASE_URL the demo runs on SQLite and opens no connection to
// the PostgreSQL that this machine runs: the demo's process is started with
// PGAPPNAME set to a name of its own (pgx gives it to every connection it
// opens), and pg_stat_activity is read all along the run. The same watch of
// a run with DATABASE_URL set sees the connections, so the watch can fail.
func TestDemoWithoutDatabaseURLOpensNoConnectionToPostgreSQL(t *testing.T) {
	pg := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN")
	if pg == "" {
		pg = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg)
	require.NoError(t, err)
	defer pool.Close()

	watch := func(t *testing.T, databaseURL string) (seen int64, out string) {
		app := fmt.Sprintf("oncebox-demo-watch-%d", time.Now().UnixNano())
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ONCEBOX_QUICKSTART_MAIN=1", "PGAPPNAME="+app, "DATABASE_URL="+databaseURL,
			"ONCEBOX_QUICKSTART_ARGS=-orders 40 -stuck 3 -duplicates 5 -timeout 60s")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		require.NoError(t, cmd.Start())
		var max atomic.Int64
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case err := <-done:
				require.NoError(t, err, "the demo failed:\n%s", buf.String())
				return max.Load(), buf.String()
			case <-tick.C:
				var n int64
				require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n))
				if n > max.Load() {
					max.Store(n)
				}
			}
		}
	}

	seen, out := watch(t, "")
	require.Contains(t, out, "lost=0 doubled=0 phantom=0")
	require.Contains(t, out, "SQLite")
	require.Zero(t, seen, "the demo on SQLite opened a connection to PostgreSQL:\n%s", out)

	seen, out = watch(t, pg)
	require.Contains(t, out, "lost=0 doubled=0 phantom=0")
	require.Positive(t, seen, "the watch saw no connection of a demo run on PostgreSQL: it cannot see one")
}
