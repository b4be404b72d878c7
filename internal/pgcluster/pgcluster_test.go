package pgcluster_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgcluster"
)

// TestClusterWithSyncReplicaAndPgBouncer: New makes a primary with
// autovacuum on, a synchronous replica that has what the primary
// committed, and a PgBouncer in front of the primary; Promote makes the
// replica writable, the multi-host DSN finds it once the primary is
// stopped, and Remove leaves no cluster behind.
func TestClusterWithSyncReplicaAndPgBouncer(t *testing.T) {
	c := pgcluster.New(t, pgcluster.Options{Sync: true, PgBouncer: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	query := func(dsn, sql string) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err, dsn)
		defer conn.Close(ctx)
		var s string
		require.NoError(t, conn.QueryRow(ctx, sql, pgx.QueryExecModeSimpleProtocol).Scan(&s), sql)
		return s
	}
	// Every port is below the kernel's ephemeral range: in it, a port free
	// when picked can be taken by a connection's local end before the
	// server binds it (CI failed so: "Address already in use").
	lo := ephemeralLow(t)
	for name, port := range map[string]int{"primary": c.PrimaryPort, "replica": c.ReplicaPort, "pgbouncer": c.PgBouncerPort} {
		require.NotZero(t, port, name)
		require.Less(t, port, lo, "the %s's port %d is in the ephemeral range (from %d)", name, port, lo)
	}
	require.Equal(t, "on", query(c.PrimaryDSN, "SHOW autovacuum"))
	require.Equal(t, "sync", query(c.PrimaryDSN, "SELECT sync_state FROM pg_stat_replication"))
	// Transaction pooling: once a's statement ended, its server connection
	// serves b, although a is still connected (session pooling would give
	// b another).
	a, err := pgx.Connect(ctx, c.PgBouncerDSN)
	require.NoError(t, err)
	defer a.Close(ctx)
	var pa int
	require.NoError(t, a.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&pa))
	require.Equal(t, strconv.Itoa(pa), query(c.PgBouncerDSN, "SELECT pg_backend_pid()::text"))
	_, err = a.Exec(ctx, "CREATE TABLE t AS SELECT 42 AS x", pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	// A synchronous replica has applied nothing less than what was
	// committed, once the commit returned (remote_apply is not asked, so
	// wait for the replay).
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(ctx, c.ReplicaDSN)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var x int
		return conn.QueryRow(ctx, "SELECT x FROM t").Scan(&x) == nil && x == 42
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, "true", query(c.ReplicaDSN, "SELECT pg_is_in_recovery()::text"))
	c.Promote(t)
	c.StopPrimary(t, "immediate")
	require.Equal(t, "false", query(c.FailoverDSN, "SELECT pg_is_in_recovery()::text"))
	require.Equal(t, "42", query(c.FailoverDSN, "SELECT x::text FROM t"))
	c.Remove(t)
	_, err = pgx.Connect(ctx, c.PrimaryDSN)
	require.Error(t, err, "the primary is gone")
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.Len(t, f, 2, "ip_local_port_range: %q", b)
	lo, err := strconv.Atoi(f[0])
	require.NoError(t, err)
	return lo
}
