// Package dialecttest is the conformance suite of oncebox's dialects: every
// guarantee of the publisher, the relay (claim, finalize, recovery, DLQ
// transfers, clean-ups, lease), the inbox and the DLQ store, tested against
// a live database by injecting the failure it protects against. A dialect's
// test calls Exercise with a Target that makes fresh tables on its server;
// the conformance module calls it once per database of the machine
// (internal/dbtest.Targets).
//
// It is test infrastructure: production packages never import it (it
// imports testing, testify and clockwork).
package dialecttest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// Target is one database the suite runs against: a dialect and a way to
// give each test its own empty namespace on a live server.
type Target struct {
	// Name is the dialect's name ("postgres", "mysql", "oracle", …). A few
	// tests use it to pick statements of their own that the Dialect does not
	// provide (a test trigger, a planner statistics refresh) and skip the
	// part they have none for.
	Name string
	// Missing, when not empty, says why the target cannot run here (Oracle
	// without ORACLE_DSN): Exercise skips every test with this message, so
	// that a run says what it did not test.
	Missing string
	// NewEmpty returns an Env on a namespace of its own (a schema, a
	// database, or a table prefix) whose oncebox tables do not exist yet,
	// and removes them when the test ends (t.Cleanup). Tests run in
	// parallel, each calling it at least once: it must be safe for
	// concurrent use, and each call must give a namespace no other call
	// shares. Required unless Missing is set.
	NewEmpty func(t testing.TB) *Env
	// OpenScriptDB, when not nil, opens a handle on the target's server
	// that runs a file of several statements in one Exec, as the
	// database's own client does (MySQL: a connection with
	// multiStatements), and closes it when the test ends. Nil when Env.DB
	// already does (PostgreSQL), or when the scripts of migrate.Statements
	// are run one statement at a time (Oracle, by Name).
	OpenScriptDB func(t testing.TB) *sql.DB
	// Finalize, when oncebox.FinalizeDelete, runs the suite with
	// outbox.finalize: delete: every Env's Dialect is its DeleteConfirmed
	// copy (a direct MarkProcessed deletes too), every poller the tests
	// build is configured so, and a trigger of the test's own records the id
	// of each IN_PROCESS row deleted, which the tests count as PROCESSED
	// (finalizeaudit.go). "" or FinalizeMark: the default.
	Finalize string
}

// New returns an Env of NewEmpty with the tables migrated (migrate.Migrate).
func (tg Target) New(t testing.TB) *Env {
	t.Helper()
	e := tg.NewEmpty(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, e.Dialect), "migrate %s", tg.Name)
	return e
}

// Env is a fresh set of oncebox tables on one target.
type Env struct {
	// Target is the target the Env was made on.
	Target Target
	// Dialect is the target's dialect, configured for the Env's
	// namespace.
	Dialect dialects.Dialect
	// Tables are the qualified table names (Dialect.Tables()).
	Tables dialects.Tables
	// DB is a database/sql handle on the server (for PostgreSQL, pgx's
	// stdlib over Pool).
	DB *sql.DB
	// Beginner is the handle the components take: pgx's pool for
	// PostgreSQL, DB for the others.
	Beginner wsql.Beginner
	// Pool is PostgreSQL's pgx pool; nil on the other targets.
	Pool *pgxpool.Pool
}

// P returns the placeholder of the n-th bind parameter, counting from 1,
// as the dialect's database writes it (dialects.Database.Placeholder).
func (e *Env) P(n int) string {
	db, ok := registry.Lookup(e.Dialect.Name())
	if !ok {
		panic("dialecttest: no database " + e.Dialect.Name() + " in the registry")
	}
	return db.Placeholder(n)
}

// ID converts an event id to the argument the id columns take.
func (e *Env) ID(id oncebox.EventID) any { return e.Dialect.EncodeID(id) }

// Count returns the rows of table matching where (empty: all), whose
// parameters are written with P.
func (e *Env) Count(t testing.TB, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT count(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	require.NoError(t, e.DB.QueryRowContext(context.Background(), q, args...).Scan(&n), "%s", q)
	return n
}

// Exec runs q and returns the rows it affected.
func (e *Env) Exec(t testing.TB, q dialects.Query) int64 {
	t.Helper()
	res, err := e.DB.ExecContext(context.Background(), q.SQL, q.Args...)
	require.NoError(t, err, "%s", q.SQL)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	return n
}

// Never fails t if cond holds within d, checking every 20ms. Unlike
// require.Never it checks in the test's goroutine, so no check of a
// database outlives the test and its schema (require.Never's condition
// goroutine can, and then fails on a dropped table).
func Never(t testing.TB, cond func() bool, d time.Duration, what string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		require.False(t, cond(), what)
	}
}

// Exercise runs every test of the suite against tg, each as a subtest
// named after the test (t.Run("TestClaim", …)); most of them run in
// parallel (t.Parallel), each on Envs of its own. A Missing target's tests
// are all skipped with its message. Select tests with -run's subtest
// pattern, e.g. -run 'TestConformance/postgres/TestClaim$'.
//
// The suite leaves no goroutine behind once its tests have ended: the
// calling package's TestMain should check it (VerifyTestMain).
func Exercise(t *testing.T, tg Target) {
	t.Helper()
	if tg.Missing == "" && tg.NewEmpty == nil {
		t.Fatalf("dialecttest: target %q has no NewEmpty", tg.Name)
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			if tg.Missing != "" {
				t.Skip(tg.Missing)
			}
			c.fn(t, tg)
		})
	}
}

// VerifyTestMain runs the tests of m (it calls m.Run and exits), then
// fails the run if a goroutine is left behind: a poller, a cleaner or a
// pool not closed (goleak). opts are goleak's, for goroutines the caller's
// driver keeps on purpose. A test package that calls Exercise calls it from
// its TestMain (or goleak.VerifyTestMain with the same options).
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, opts...)
}
