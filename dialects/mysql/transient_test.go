package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

func TestIsTransientOnRealMySQLErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	down, err := sql.Open("mysql", "root@tcp("+dbtest.ClosedPort(t)+")/test?timeout=2s")
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	err = down.PingContext(ctx)
	require.Error(t, err)
	require.True(t, registry.IsTransient(err), "connection refused: %v", err)

	e := mysqlTarget(t).New(t)
	_, err = e.DB.ExecContext(ctx, "SELEC 1")
	require.False(t, registry.IsTransient(err), "syntax error: %v", err)
	id := newID(t)
	_, err = e.DB.ExecContext(ctx, "INSERT INTO "+e.Tables.Inbox+" (consumer, event_id, processed_at) VALUES ('c', ?, NOW())", id.String())
	require.NoError(t, err)
	_, err = e.DB.ExecContext(ctx, "INSERT INTO "+e.Tables.Inbox+" (consumer, event_id, processed_at) VALUES ('c', ?, NOW())", id.String())
	require.False(t, registry.IsTransient(err), "duplicate key: %v", err)

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
	require.True(t, registry.IsTransient(err), "lock wait timeout: %v", err)
}
