// Package dbtest gives tests a fresh, migrated set of oncebox tables on every
// database a live server is available for: PostgreSQL and MySQL/MariaDB
// always (make services starts them), Oracle when ORACLE_DSN is set. The
// conformance module runs the suite (dialecttest.Exercise) once per Target,
// through Target.Suite; the core's own tests use New and Each. Its Env is
// the suite's (dialecttest.Env), so it imports dialecttest and through it
// the components (poller, middleware, dlq, …): a test of one of those
// packages that uses dbtest is an external test package (package poller_test),
// as every one is today.
//
// It does not import the Oracle driver, so that the core module's tests do
// not require go-ora (docs/modules.md): a test package that runs Oracle
// targets imports it (the conformance module does); elsewhere the Oracle
// target is Missing (OracleNotLinked).
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// Target is one database the suite runs against.
type Target struct {
	// InPackage reports whether the database's own package runs the
	// conformance suite in the core module's tests (dialects/<name>/
	// conformance_test.go): its driver is one the core module requires.
	// The conformance module runs the others (Oracle: go-ora is not a
	// requirement of the core).
	InPackage bool
	// Name is the dialect's name: "postgres", "mysql" or "oracle".
	Name string
	// DSN is the server's address, from the environment or the default.
	DSN string
	// Missing, when not empty, says why the target cannot run here (Oracle
	// without ORACLE_DSN); its tests are skipped with that message.
	Missing string
}

// PostgresDSN is the PostgreSQL server of the tests:
// ONCEBOX_TEST_POSTGRES_DSN or the local server.
func PostgresDSN() string {
	if dsn := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://root@127.0.0.1:5432/test?sslmode=disable"
}

// MySQLDSN is the MySQL/MariaDB server of the tests, in go-sql-driver's
// form: ONCEBOX_TEST_MYSQL_DSN or the local MariaDB. parseTime and loc=UTC
// are required by the MySQL dialect.
func MySQLDSN() string {
	if dsn := os.Getenv("ONCEBOX_TEST_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC"
}

// OracleDSN is the Oracle server of the tests, in go-ora's URL form
// (oracle://user:password@host:1521/service), from ORACLE_DSN; "" when none
// is given.
func OracleDSN() string { return os.Getenv("ORACLE_DSN") }

// OracleNotRun is the message of every Oracle test skipped for want of a
// server.
const OracleNotRun = "ORACLE NOT RUN: no ORACLE_DSN given, so the Oracle dialect was not tested against a server " +
	"(only its generated SQL, by the golden files in dialects/testdata); set ORACLE_DSN=oracle://user:pass@host:1521/service to run it"

// OracleNotLinked is the message of every Oracle test skipped because the
// test binary does not link the Oracle driver.
const OracleNotLinked = "ORACLE NOT RUN HERE: ORACLE_DSN is set, but this test package does not link go-ora " +
	"(the core module does not require it: docs/modules.md); the conformance module runs the Oracle targets " +
	`(a test package that imports _ "github.com/sijms/go-ora/v2" runs them too)`

// Targets returns the databases of the suite, Oracle marked Missing when
// ORACLE_DSN is not set or the test binary does not link the Oracle driver.
func Targets() []Target {
	o := Target{Name: "oracle", DSN: OracleDSN()}
	switch {
	case o.DSN == "":
		o.Missing = OracleNotRun
	case !slices.Contains(sql.Drivers(), "oracle"):
		o.Missing = OracleNotLinked
	}
	return []Target{
		{Name: "postgres", DSN: PostgresDSN(), InPackage: true},
		{Name: "mysql", DSN: MySQLDSN(), InPackage: true},
		o,
	}
}

// TargetNamed returns the target of the database called name, and fails
// the test when there is none.
func TargetNamed(t testing.TB, name string) Target {
	t.Helper()
	for _, tg := range Targets() {
		if tg.Name == name {
			return tg
		}
	}
	t.Fatalf("dbtest: no target %q", name)
	return Target{}
}

// Each runs fn as one subtest per target, named after it. A Missing target's
// subtest is skipped with its message.
func Each(t *testing.T, fn func(t *testing.T, tg Target)) {
	t.Helper()
	for _, tg := range Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			if tg.Missing != "" {
				t.Skip(tg.Missing)
			}
			fn(t, tg)
		})
	}
}

// Env is a fresh set of oncebox tables on one target: the suite's
// (dialecttest.Env).
type Env = dialecttest.Env

// Suite returns tg as the conformance suite's target
// (dialecttest.Exercise): the same Name, Missing and tables.
func (tg Target) Suite() dialecttest.Target {
	st := dialecttest.Target{Name: tg.Name, Missing: tg.Missing, NewEmpty: tg.NewEmpty}
	if tg.Name == "mysql" {
		st.OpenScriptDB = tg.openMultiStatements
	}
	return st
}

// openMultiStatements opens a MySQL handle that runs a file of several
// statements in one Exec, as the mysql client does.
func (tg Target) openMultiStatements(t testing.TB) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(tg.DSN)
	require.NoError(t, err)
	cfg.MultiStatements = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// New returns an Env with migrated tables, removed at the end of the test.
func (tg Target) New(t testing.TB) *Env {
	t.Helper()
	return tg.Suite().New(t)
}

// NewEmpty returns an Env whose tables do not exist yet.
func (tg Target) NewEmpty(t testing.TB) *Env {
	t.Helper()
	if tg.Missing != "" {
		t.Skip(tg.Missing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	suffix := randomSuffix(t)
	e := &Env{Target: tg.Suite()}
	var cfg oncebox.TablesConfig
	switch tg.Name {
	case "postgres":
		pcfg, err := pgxpool.ParseConfig(tg.DSN)
		require.NoError(t, err, "parse the PostgreSQL DSN %q", tg.DSN)
		pcfg.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		require.NoError(t, err)
		require.NoError(t, pool.Ping(ctx), "the tests need PostgreSQL at %s (make services starts it)", tg.DSN)
		schema := "oncebox_test_" + suffix
		_, err = pool.Exec(ctx, "CREATE SCHEMA "+schema)
		require.NoError(t, err)
		e.Pool, e.DB, e.Beginner = pool, stdlib.OpenDBFromPool(pool), wsql.BeginnerFromPgx(pool)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = e.DB.Close()
			pool.Close()
			if err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		cfg.Schema = schema
	case "mysql":
		mcfg, err := mysql.ParseDSN(tg.DSN)
		require.NoError(t, err, "parse the MySQL DSN %q", tg.DSN)
		db, err := sql.Open("mysql", mcfg.FormatDSN())
		require.NoError(t, err)
		db.SetMaxOpenConns(8)
		require.NoError(t, db.PingContext(ctx), "the tests need MySQL/MariaDB at %s (make services starts it)", tg.DSN)
		schema := "oncebox_test_" + suffix
		_, err = db.ExecContext(ctx, "CREATE DATABASE "+schema)
		require.NoError(t, err)
		e.DB, e.Beginner = db, wsql.BeginnerFromStdSQL(db)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := db.ExecContext(ctx, "DROP DATABASE "+schema)
			_ = db.Close()
			if err != nil {
				t.Errorf("drop database %s: %v", schema, err)
			}
		})
		cfg.Schema = schema
	case "oracle":
		db, err := sql.Open("oracle", tg.DSN)
		require.NoError(t, err)
		db.SetMaxOpenConns(8)
		require.NoError(t, db.PingContext(ctx), "ORACLE_DSN=%s does not answer", tg.DSN)
		e.DB, e.Beginner = db, wsql.BeginnerFromStdSQL(db)
		// One prefix per test in the connected user's schema: creating a
		// user per test needs privileges a test account rarely has.
		cfg.Prefix = "t" + suffix + "_"
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, table := range []string{e.Tables.DLQ, e.Tables.Events, e.Tables.Inbox, e.Tables.Jobs, e.Tables.Instances, e.Tables.Migrations} {
				_, err := db.ExecContext(ctx, "DROP TABLE "+table+" PURGE")
				if err != nil && !strings.Contains(err.Error(), "ORA-00942") {
					t.Errorf("drop table %s: %v", table, err)
				}
			}
			_ = db.Close()
		})
	default:
		t.Fatalf("dbtest: unknown target %q", tg.Name)
	}
	d, err := registry.New(tg.Name, cfg)
	require.NoError(t, err)
	e.Dialect, e.Tables = d, d.Tables()
	return e
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// Describe names the target and its server for failure messages.
func (tg Target) Describe() string { return fmt.Sprintf("%s at %s", tg.Name, tg.DSN) }

// Never fails t if cond holds within d, checking every 20ms, in the
// test's goroutine (dialecttest.Never).
func Never(t testing.TB, cond func() bool, d time.Duration, what string) {
	t.Helper()
	dialecttest.Never(t, cond, d, what)
}

// ClosedPort returns a loopback address nothing listens on.
func ClosedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dbtest: listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("dbtest: close: %v", err)
	}
	return addr
}
