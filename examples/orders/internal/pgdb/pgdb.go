// Package pgdb opens the services' PostgreSQL pools and prepares their
// schemas: each service owns one schema holding its business tables and its
// own copy of oncebox's tables.
//
// The services migrate at start so that the example runs with one command.
// In production, run migrations as a deploy step (a job before the rollout,
// with a role allowed to run DDL) and let the services start only against a
// migrated schema; migrate.Migrate is idempotent and serialised by an
// advisory lock, so either way is safe when several instances start at once.
package pgdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// DefaultMaxConns is the pool size when the URL does not set
// pool_max_conns. The API holds one connection per request being written,
// the relay up to a handful, the inbox one per message being handled.
const DefaultMaxConns = 16

// Connect opens a pool on url and checks that the server answers within
// 5 seconds. The error says where it tried, without the password.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d (database %q, user %q)", cfg.ConnConfig.Host, cfg.ConnConfig.Port,
		cfg.ConnConfig.Database, cfg.ConnConfig.User)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w (is it running? `make services` starts the local one; -database-url or $DATABASE_URL points elsewhere)", where, err)
	}
	return pool, nil
}

// Dialect returns oncebox's PostgreSQL dialect for the tables in schema. It
// also validates schema as a plain identifier (letters, digits, underscores),
// which is what makes it safe to write into the SQL of this package.
func Dialect(schema string) (*postgres.Dialect, error) {
	if schema == "" {
		return nil, fmt.Errorf("schema: empty; every service needs a schema of its own")
	}
	pg, err := postgres.New(oncebox.TablesConfig{Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", schema, err)
	}
	return pg, nil
}

// Setup creates schema if it does not exist, runs ddl (the service's own
// tables, each statement idempotent) in one transaction, then migrates
// oncebox's tables into the schema with migrate.Migrate. Instances starting
// together queue on an advisory lock, so CREATE SCHEMA IF NOT EXISTS does
// not race. It returns the dialect of the schema.
func Setup(ctx context.Context, pool *pgxpool.Pool, schema string, ddl []string) (*postgres.Dialect, error) {
	pg, err := Dialect(schema)
	if err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('oncebox-orders-example:' || $1))", schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
			return err
		}
		for _, stmt := range ddl {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", firstLine(stmt), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create the tables of schema %s: %w", schema, err)
	}
	if err := migrate.Migrate(ctx, wsql.BeginnerFromPgx(pool), pg); err != nil {
		return nil, fmt.Errorf("migrate oncebox's tables in schema %s: %w", schema, err)
	}
	return pg, nil
}

// DropSchema drops schema and everything in it. For tests and throw-away
// demo runs only.
func DropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if _, err := Dialect(schema); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	return err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
