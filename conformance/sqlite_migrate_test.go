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
	"sync"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// Migrators on several pools (as several processes would) migrate one
// file at once: with _txlock=immediate each migration transaction holds
// the file's write lock from its BEGIN, so they take turns, every
// migration is applied once and none fails. Without it (a deferred
// BEGIN), a migrator whose first read saw the file before another's
// commit cannot write (SQLITE_BUSY_SNAPSHOT): it fails with a transient
// error, having changed nothing, and a second run finds the migrations
// applied (docs/sqlite.md asks for _txlock=immediate).
func TestSQLiteConcurrentMigratorsTakeTurns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		dsnOf func(path string) string
	}{
		{"immediate", sqliteDSN},
		{"deferred", func(path string) string { return strings.Replace(sqliteDSN(path), "_txlock=immediate&", "", 1) }},
	} {
		path := filepath.Join(t.TempDir(), "oncebox.db")
		d, err := sqlite.New(oncebox.TablesConfig{})
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			db, err := sql.Open("sqlite", c.dsnOf(path))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			wg.Go(func() { errs[i] = migrate.Migrate(context.Background(), wsql.BeginnerFromStdSQL(db), d) })
		}
		wg.Wait()
		failed := 0
		for i, err := range errs {
			if c.name == "immediate" || err == nil {
				require.NoError(t, err, "%s: migrator %d", c.name, i)
				continue
			}
			require.True(t, sqlite.IsTransient(err), "%s: migrator %d: %v", c.name, i, err)
			failed++
		}
		t.Logf("%s: %d of %d migrators failed with a transient error", c.name, failed, len(errs))
		db := openSQLite(t, path)
		require.NoError(t, migrate.Migrate(context.Background(), wsql.BeginnerFromStdSQL(db), d), "%s: a second run", c.name)
		var versions, distinct int
		require.NoError(t, db.QueryRow("SELECT count(*), count(DISTINCT version) FROM "+d.Tables().Migrations).Scan(&versions, &distinct))
		require.Equal(t, 4, versions, c.name)
		require.Equal(t, 4, distinct, c.name)
		require.NoError(t, d.CheckSchema(context.Background(), wsql.BeginnerFromStdSQL(db)), c.name)
	}
}

// A write that finds the file's write lock held past its busy timeout
// fails with modernc.org/sqlite's SQLITE_BUSY, which IsTransient
// recognises without importing the driver.
func TestSQLiteBusyIsTransient(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncebox.db")
	holder := openSQLite(t, path)
	_, err := holder.Exec("CREATE TABLE t (x INTEGER)")
	require.NoError(t, err)
	tx, err := holder.Begin() // BEGIN IMMEDIATE: the write lock
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()

	impatient, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer impatient.Close()
	_, err = impatient.Exec("INSERT INTO t VALUES (1)")
	require.Error(t, err)
	require.True(t, sqlite.IsTransient(err), "%T: %v", err, err)
	_, err = impatient.Exec("INSERT INTO missing VALUES (1)")
	require.Error(t, err)
	require.False(t, sqlite.IsTransient(err), "%v", err)
}
