// Package pgtest gives each test its own schema on the PostgreSQL of the
// machine, migrated, and drops it when the test ends. A missing server fails
// the test loudly: it never skips.
package pgtest

import (
	"context"
	"crypto/rand"
	stdsql "database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// DSN is the connection string of the test database: $ONCEBOX_TEST_POSTGRES_DSN
// or the local server's database "test".
func DSN() string {
	if dsn := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://root@127.0.0.1:5432/test?sslmode=disable"
}

// Schema is one test's schema: its name, a dialect over it and a pool.
type Schema struct {
	Name    string
	Dialect *postgres.Dialect
	Pool    *pgxpool.Pool
	// Beginner is Pool wrapped for watermill-sql.
	Beginner wsql.Beginner
}

// Option adjusts a pool's configuration before it connects.
type Option func(*pgxpool.Config)

// WithTracer installs a pgx query tracer on every connection of the pool.
func WithTracer(tr pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = tr }
}

// NewSchema creates a fresh schema with a random name, migrates it and
// registers its removal with t.Cleanup.
func NewSchema(t testing.TB, opts ...Option) *Schema {
	t.Helper()
	s := NewEmptySchema(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, migrate.Migrate(ctx, s.Beginner, s.Dialect))
	return s
}

// NewEmptySchema creates a fresh schema without migrating it.
func NewEmptySchema(t testing.TB, opts ...Option) *Schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "oncebox_test_" + randomSuffix(t)
	cfg, err := pgxpool.ParseConfig(DSN())
	require.NoError(t, err, "parse the test DSN %q", DSN())
	cfg.MaxConns = 8
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, pool.Ping(ctx), "the tests need PostgreSQL at %s (make services starts it)", DSN())
	_, err = pool.Exec(ctx, "CREATE SCHEMA "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
		pool.Close()
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	d, err := postgres.New(oncebox.TablesConfig{Schema: name})
	require.NoError(t, err)
	return &Schema{Name: name, Dialect: d, Pool: pool, Beginner: wsql.BeginnerFromPgx(pool)}
}

// StdDB opens a database/sql handle (pgx's stdlib driver) on the test
// database, closed at the end of the test.
func (s *Schema) StdDB(t testing.TB) *stdsql.DB {
	t.Helper()
	db := stdlib.OpenDBFromPool(s.Pool)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Count returns the number of rows of table matching where ("" for all).
func (s *Schema) Count(t testing.TB, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT count(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	require.NoError(t, s.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
