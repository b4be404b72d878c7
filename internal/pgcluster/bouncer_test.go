package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgcluster"
)

// TestBouncerInFrontOfTheMachinesServer: a PgBouncer in front of the
// machine's own server (5432) serves queries in transaction pooling and
// changes nothing of the server.
func TestBouncerInFrontOfTheMachinesServer(t *testing.T) {
	dsn := pgcluster.Bouncer(t, 5432, "root", "test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err, dsn)
	defer conn.Close(ctx)
	var port string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('port')", pgx.QueryExecModeExec).Scan(&port))
	require.Equal(t, "5432", port)
}
