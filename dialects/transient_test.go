package dialects_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// The classifier is checked on errors the real drivers return, not on
// errors made up to fit it.
func TestIsTransientOnRealPostgreSQLErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := pgx.Connect(ctx, "postgres://root@"+dbtest.ClosedPort(t)+"/test?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.True(t, registry.IsTransient(err), "connection refused: %v", err)

	conn, err := pgx.Connect(ctx, dbtest.PostgresDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	_, err = conn.Exec(ctx, "SELEC 1")
	require.False(t, registry.IsTransient(err), "syntax error: %v", err)
	_, err = conn.Exec(ctx, "SELECT 1/0")
	require.False(t, registry.IsTransient(err), "division by zero: %v", err)

	_, err = conn.Exec(ctx, "SET statement_timeout = '50ms'")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_sleep(2)")
	require.True(t, registry.IsTransient(err), "statement timeout: %v", err)
	_, err = conn.Exec(ctx, "SET statement_timeout = 0")
	require.NoError(t, err)

	// The server ends the session (a restart, a failover, an operator).
	victim, err := pgx.Connect(ctx, dbtest.PostgresDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = victim.Close(ctx) })
	_, err = conn.Exec(ctx, "SELECT pg_terminate_backend($1)", victim.PgConn().PID())
	require.NoError(t, err)
	_, err = victim.Exec(ctx, "SELECT 1")
	require.Error(t, err)
	require.True(t, registry.IsTransient(err), "terminated session: %v", err)
}

func TestIsTransientOnWrappedAndPlainErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	for _, err := range []error{
		fmt.Errorf("handler: %w", ctx.Err()),
		fmt.Errorf("publish: %w", oncebox.ErrBrokerUnavailable),
		fmt.Errorf("query: %w", sql.ErrConnDone),
		context.Canceled, // the router is shutting down: redeliver, do not park
	} {
		require.True(t, registry.IsTransient(err), "%v", err)
	}
	for _, err := range []error{nil, errors.New("cannot parse order"), sql.ErrNoRows} {
		require.False(t, registry.IsTransient(err), "%v", err)
	}
}
