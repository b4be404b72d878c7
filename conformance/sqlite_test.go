package conformance_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the SQLite driver, "sqlite": pure Go, linked by this module only

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
)

// sqliteParams are the DSN parameters docs/sqlite.md asks for: every
// BeginTx a BEGIN IMMEDIATE (the write lock first, so that a transaction
// that reads then writes never fails on a stale snapshot), a busy
// timeout, WAL, and times read back from their INTEGER microseconds.
const sqliteParams = "_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
	"&_pragma=foreign_keys(1)&_inttotime=1&_time_integer_format=unix_micro"

// sqliteDSN is the DSN of the database file path.
func sqliteDSN(path string) string { return "file:" + path + "?" + sqliteParams }

// openSQLite opens a pool on the file path, closed when the test ends.
func openSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(path))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Ping(), "open %s", path)
	return db
}

// sqliteTarget is SQLite as the suite's target: a file of its own in the
// test's temporary directory for every Env, so that the tests run in
// parallel without sharing a write lock.
func sqliteTarget() dialecttest.Target {
	var tg dialecttest.Target
	tg = dialecttest.Target{
		Name: "sqlite",
		NewEmpty: func(t testing.TB) *dialecttest.Env {
			db := openSQLite(t, filepath.Join(t.TempDir(), "oncebox.db"))
			d, err := sqlite.New(oncebox.TablesConfig{})
			require.NoError(t, err)
			return &dialecttest.Env{Target: tg, Dialect: d, Tables: d.Tables(), DB: db, Beginner: wsql.BeginnerFromStdSQL(db)}
		},
	}
	return tg
}

// TestConformanceSQLite runs every test of the suite on SQLite through
// modernc.org/sqlite: TestConformanceSQLite/<TestName>.
func TestConformanceSQLite(t *testing.T) {
	dialecttest.Exercise(t, sqliteTarget())
}
