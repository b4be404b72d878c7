// The SQLite tests run without the race detector (scripts/test.sh runs
// them in a second pass): -race instruments modernc.org/sqlite's engine,
// transpiled C, and slows it past the relay's heartbeat timeout
// (docs/sqlite.md, "What was tested"). oncebox's own code is race-checked
// by the suite on PostgreSQL and MariaDB.

//go:build !race

package conformance_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// CheckSchema (the relay's start-up check) refuses a connection set up
// otherwise than docs/sqlite.md asks, each error naming the DSN parameter
// to add; with every parameter it passes.
func TestSQLiteCheckSchemaNamesTheMissingDSNParameter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncebox.db")
	d, err := sqlite.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, migrate.Migrate(ctx, wsql.BeginnerFromStdSQL(openSQLite(t, path)), d))
	require.NoError(t, d.CheckSchema(ctx, wsql.BeginnerFromStdSQL(openSQLite(t, path))), "the DSN of docs/sqlite.md")

	without := func(param string) *sql.DB {
		dsn := strings.Replace(sqliteDSN(path), param, "", 1)
		require.NotEqual(t, sqliteDSN(path), dsn, param)
		db, err := sql.Open("sqlite", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	for _, c := range []struct{ drop, want string }{
		{"&_pragma=busy_timeout(10000)", "_pragma=busy_timeout(10000)"},
		{"&_inttotime=1", "_inttotime=1&_time_integer_format=unix_micro"},
		{"&_time_integer_format=unix_micro", "_time_integer_format=unix_micro"},
	} {
		err := d.CheckSchema(ctx, wsql.BeginnerFromStdSQL(without(c.drop)))
		require.ErrorContains(t, err, c.want, "without %s", c.drop)
	}

	// A file left in the rollback journal (opened without WAL ever set).
	rollback := filepath.Join(t.TempDir(), "rollback.db")
	db, err := sql.Open("sqlite", "file:"+rollback+"?_txlock=immediate&_pragma=busy_timeout(10000)&_inttotime=1&_time_integer_format=unix_micro")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, migrate.Migrate(ctx, wsql.BeginnerFromStdSQL(db), d))
	err = d.CheckSchema(ctx, wsql.BeginnerFromStdSQL(db))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "_pragma=journal_mode(WAL)")
}
