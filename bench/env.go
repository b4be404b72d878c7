package main

import (
	"context"
	"fmt"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// env is what the scenarios share: a pool and a scratch schema that is
// dropped and re-created for each scenario.
type env struct {
	dsn   string
	pool  *pgxpool.Pool
	scale float64
}

const benchSchema = "oncebox_bench"

func newEnv(ctx context.Context, dsn string, scale float64) (*env, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", dsn, err)
	}
	return &env{dsn: dsn, pool: pool, scale: scale}, nil
}

func (e *env) close() {
	_, _ = e.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+benchSchema+" CASCADE")
	e.pool.Close()
}

// n scales a work amount, keeping at least min.
func (e *env) n(base, min int) int {
	return max(int(float64(base)*e.scale), min)
}

// freshSchema drops and re-creates the bench schema, migrated, and returns
// its dialect.
func (e *env) freshSchema(ctx context.Context) (*dialects.PostgreSQL, error) {
	if _, err := e.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+benchSchema+" CASCADE; CREATE SCHEMA "+benchSchema); err != nil {
		return nil, err
	}
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{Schema: benchSchema})
	if err != nil {
		return nil, err
	}
	return d, migrate.Migrate(ctx, wsql.BeginnerFromPgx(e.pool), d)
}
