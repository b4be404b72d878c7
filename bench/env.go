package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// env is what the scenarios share: a pool and a scratch schema that is
// dropped and re-created for each scenario.
type env struct {
	dsn   string
	pool  *pgxpool.Pool
	scale float64
	// mariadbDSN is the MariaDB of the mariadb scenarios, which connect to
	// it themselves.
	mariadbDSN string
	// forwarderDeadline bounds the backlog scenario's largest forwarder
	// drain; what it delivered by then is its figure.
	forwarderDeadline time.Duration
}

// benchSchema is this run's scratch schema on PostgreSQL (on MariaDB, its
// scratch database): oncebox_bench_, the process id and a random suffix, so
// that two runs at once (two engineers, or a bench beside its own smoke test)
// never drop each other's tables. Each scenario drops it when it ends, on an
// error too, and run turns SIGINT and SIGTERM into a cancelled context so that
// those clean-ups run; only a run killed outright (SIGKILL) leaves it behind,
// under a name that says which run it was (run prints it at the start).
var benchSchema = runSchemaName()

// runSchemaName returns a name unique to this run that needs no quoting in
// PostgreSQL or MariaDB: lower-case letters, digits and underscores.
func runSchemaName() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails: it crashes the program instead
	return fmt.Sprintf("oncebox_bench_%d_%x", os.Getpid(), b)
}

func newEnv(ctx context.Context, dsn, mariadbDSN string, scale float64) (*env, error) {
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &env{dsn: dsn, pool: pool, scale: scale, mariadbDSN: mariadbDSN}, nil
}

// poolOption adjusts a pool's configuration before it connects.
type poolOption func(*pgxpool.Config)

// onDatabase connects to database instead of the DSN's.
func onDatabase(database string) poolOption {
	return func(c *pgxpool.Config) { c.ConnConfig.Database = database }
}

// withTracer installs tr on every connection of the pool.
func withTracer(tr pgx.QueryTracer) poolOption {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = tr }
}

// newPool connects to dsn with at most 8 connections, as adjusted by opts.
func newPool(ctx context.Context, dsn string, opts ...poolOption) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", err)
	}
	cfg.MaxConns = 8
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", dsn, err)
	}
	return pool, nil
}

func (e *env) close() {
	e.dropSchema()
	e.pool.Close()
}

// dropSchema removes the bench schema and everything in it. Scenarios defer
// it so that an error leaves nothing behind.
func (e *env) dropSchema() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = e.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+benchSchema+" CASCADE")
}

// n scales a work amount, keeping at least min.
func (e *env) n(base, min int) int {
	return max(int(float64(base)*e.scale), min)
}

// freshSchema drops and re-creates the bench schema, migrated, and returns
// its dialect.
func (e *env) freshSchema(ctx context.Context) (*postgres.Dialect, error) {
	return freshSchemaOn(ctx, e.pool)
}

// freshSchemaOn is freshSchema on the database of pool.
func freshSchemaOn(ctx context.Context, pool *pgxpool.Pool) (*postgres.Dialect, error) {
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+benchSchema+" CASCADE; CREATE SCHEMA "+benchSchema); err != nil {
		return nil, err
	}
	d, err := postgres.New(oncebox.TablesConfig{Schema: benchSchema})
	if err != nil {
		return nil, err
	}
	return d, migrate.Migrate(ctx, wsql.BeginnerFromPgx(pool), d)
}

// autovacuum returns the server's autovacuum setting ("on", "off", or why
// it could not be read).
func (e *env) autovacuum(ctx context.Context) string {
	var v string
	if err := e.pool.QueryRow(ctx, "SHOW autovacuum").Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v
}
