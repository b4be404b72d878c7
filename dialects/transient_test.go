package dialects_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// The classifier is checked on errors the real drivers return, not on
// errors made up to fit it.
func TestIsTransientOnRealPostgreSQLErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := pgx.Connect(ctx, "postgres://root@"+closedPort(t)+"/test?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.True(t, dialects.IsTransient(err), "connection refused: %v", err)

	conn, err := pgx.Connect(ctx, dbtest.PostgresDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	_, err = conn.Exec(ctx, "SELEC 1")
	require.False(t, dialects.IsTransient(err), "syntax error: %v", err)
	_, err = conn.Exec(ctx, "SELECT 1/0")
	require.False(t, dialects.IsTransient(err), "division by zero: %v", err)

	_, err = conn.Exec(ctx, "SET statement_timeout = '50ms'")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_sleep(2)")
	require.True(t, dialects.IsTransient(err), "statement timeout: %v", err)
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
	require.True(t, dialects.IsTransient(err), "terminated session: %v", err)
}

func TestIsTransientOnRealMySQLErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	down, err := sql.Open("mysql", "root@tcp("+closedPort(t)+")/test?timeout=2s")
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	err = down.PingContext(ctx)
	require.Error(t, err)
	require.True(t, dialects.IsTransient(err), "connection refused: %v", err)

	e := mysqlTarget(t).New(t)
	_, err = e.DB.ExecContext(ctx, "SELEC 1")
	require.False(t, dialects.IsTransient(err), "syntax error: %v", err)
	id := newID(t)
	_, err = e.DB.ExecContext(ctx, "INSERT INTO "+e.Tables.Inbox+" (consumer, event_id, processed_at) VALUES ('c', ?, NOW())", id.String())
	require.NoError(t, err)
	_, err = e.DB.ExecContext(ctx, "INSERT INTO "+e.Tables.Inbox+" (consumer, event_id, processed_at) VALUES ('c', ?, NOW())", id.String())
	require.False(t, dialects.IsTransient(err), "duplicate key: %v", err)

	// A lock wait timeout: one transaction holds the row, another waits 1s.
	holder, err := e.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback() })
	_, err = holder.ExecContext(ctx, "UPDATE "+e.Tables.Inbox+" SET processed_at = NOW() WHERE event_id = ?", id.String())
	require.NoError(t, err)
	waiter, err := e.DB.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiter.Close() })
	_, err = waiter.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
	require.NoError(t, err)
	_, err = waiter.ExecContext(ctx, "UPDATE "+e.Tables.Inbox+" SET processed_at = NOW() WHERE event_id = ?", id.String())
	require.Error(t, err)
	require.True(t, dialects.IsTransient(err), "lock wait timeout: %v", err)
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
		require.True(t, dialects.IsTransient(err), "%v", err)
	}
	for _, err := range []error{nil, errors.New("cannot parse order"), sql.ErrNoRows} {
		require.False(t, dialects.IsTransient(err), "%v", err)
	}
}
