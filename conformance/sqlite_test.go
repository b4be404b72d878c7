// The SQLite tests run without the race detector (scripts/test.sh runs
// them in a second pass): -race instruments modernc.org/sqlite's engine,
// transpiled C, and slows it past the relay's heartbeat timeout
// (docs/sqlite.md, "What was tested"). oncebox's own code is race-checked
// by the suite on PostgreSQL and MariaDB.

//go:build !race

package conformance_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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

// sqliteTarget is SQLite as the suite's target. Each test (and subtest)
// gets a file of its own in a temporary directory, so that the tests run
// in parallel without sharing a write lock; each Env of a test is a pool
// of its own on that file with tables of their own (a prefix, t1_, t2_,
// …, in the schema "main", the file opened). A second Env of one test is then
// what a second Env on a server is: another instance (pool) that reaches
// the first Env's tables by their qualified names.
func sqliteTarget() dialecttest.Target {
	files := &sqliteFiles{m: map[string]*sqliteFile{}}
	var tg dialecttest.Target
	tg = dialecttest.Target{
		Name: "sqlite",
		NewEmpty: func(t testing.TB) *dialecttest.Env {
			path, prefix := files.take(t)
			db := openSQLite(t, path)
			d, err := sqlite.New(oncebox.TablesConfig{Schema: "main", Prefix: prefix})
			require.NoError(t, err)
			return &dialecttest.Env{Target: tg, Dialect: d, Tables: d.Tables(), DB: db, Beginner: wsql.BeginnerFromStdSQL(db)}
		},
	}
	return tg
}

// sqliteFiles are the database files of the tests running, by test
// name.
type sqliteFiles struct {
	mu sync.Mutex
	m  map[string]*sqliteFile
}

// sqliteFile is one test's file: its directory, the Envs open on it, and
// the prefixes given so far.
type sqliteFile struct {
	dir        string
	refs, last int
}

// take returns the file of t and a prefix no other Env on it has; the directory is removed when the last Env's test ends.
func (f *sqliteFiles) take(t testing.TB) (path, prefix string) {
	t.Helper()
	// By the test's full name: parallel subtests that each set up their
	// Envs (a table of cases) get files of their own, and do not queue on
	// one write lock.
	key := t.Name()
	f.mu.Lock()
	defer f.mu.Unlock()
	file := f.m[key]
	if file == nil {
		dir, err := os.MkdirTemp("", "oncebox-sqlite-")
		require.NoError(t, err)
		file = &sqliteFile{dir: dir}
		f.m[key] = file
	}
	file.refs++
	file.last++
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if file.refs--; file.refs == 0 {
			delete(f.m, key)
			_ = os.RemoveAll(file.dir)
		}
	})
	return filepath.Join(file.dir, "oncebox.db"), "t" + strconv.Itoa(file.last) + "_"
}

// TestConformanceSQLite runs every test of the suite on SQLite through
// modernc.org/sqlite: TestConformanceSQLite/<TestName>.
func TestConformanceSQLite(t *testing.T) {
	dialecttest.Exercise(t, sqliteTarget())
}

// TestConformanceSQLiteFinalizeDelete runs the same suite with
// outbox.finalize: delete (dialecttest, finalizeaudit.go).
func TestConformanceSQLiteFinalizeDelete(t *testing.T) {
	tg := sqliteTarget()
	tg.Finalize = oncebox.FinalizeDelete
	dialecttest.Exercise(t, tg)
}
