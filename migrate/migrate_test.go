package migrate_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/migrate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func tableExists(t *testing.T, s *pgtest.Schema, name string) bool {
	t.Helper()
	var exists bool
	require.NoError(t, s.Pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists))
	return exists
}

func TestMigrateCreatesEveryTableAndIsIdempotent(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	ctx := context.Background()
	require.NoError(t, migrate.Migrate(ctx, s.Beginner, s.Dialect))
	require.NoError(t, migrate.Migrate(ctx, s.Beginner, s.Dialect), "a second run does nothing")

	tables := s.Dialect.Tables()
	for _, name := range []string{tables.Events, tables.DLQ, tables.Inbox, tables.Jobs, tables.Migrations} {
		require.True(t, tableExists(t, s, name), name)
	}
	migrations, err := s.Dialect.Migrations()
	require.NoError(t, err)
	require.Equal(t, len(migrations), s.Count(t, tables.Migrations, ""))

	applied, err := migrate.Applied(ctx, s.Beginner, s.Dialect)
	require.NoError(t, err)
	require.True(t, applied[1])

	// The partial indexes the relay's queries use are there.
	var idx []string
	// (pg_catalog directly: the pg_indexes view calls pg_get_indexdef on every
	// schema's indexes, including those other tests are dropping.)
	rows, err := s.Pool.Query(ctx, `SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND i.indpred IS NOT NULL ORDER BY 1`, s.Name)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		idx = append(idx, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"outbox_dlq_events_message_uq", "outbox_events_failed_idx", "outbox_events_in_process_idx",
		"outbox_events_pending_idx", "outbox_events_processed_idx"}, idx)
}

func TestMigrateConcurrentInstances(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	const instances = 4
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = migrate.Migrate(context.Background(), s.Beginner, s.Dialect)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "instance %d", i)
	}
	require.Equal(t, 1, s.Count(t, s.Dialect.Tables().Migrations, ""), "version 1 applied once")
}

func TestMigrateWithPrefixOverStdSQL(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{Schema: s.Name, Prefix: "billing_"})
	require.NoError(t, err)
	require.NoError(t, migrate.Migrate(context.Background(), wsql.BeginnerFromStdSQL(s.StdDB(t)), d))
	require.True(t, tableExists(t, s, s.Name+".billing_outbox_events"))
	require.True(t, tableExists(t, s, s.Name+".billing_inbox_events"))
	require.False(t, tableExists(t, s, s.Name+".outbox_events"))
}

func TestMigrateRefusesATransactionAndBadArguments(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	ctx := context.Background()
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	require.ErrorIs(t, migrate.Migrate(ctx, s.Beginner, nil), oncebox.ErrInvalidInput)
	require.ErrorIs(t, migrate.Migrate(ctx, nil, s.Dialect), oncebox.ErrInvalidInput)
	// A transaction wrapped as a Beginner-like value is refused.
	require.ErrorIs(t, migrate.Migrate(ctx, txBeginner{wsql.TxFromPgx(tx)}, s.Dialect), migrate.ErrInTransaction)
	require.False(t, tableExists(t, s, s.Dialect.Tables().Events))
}

// txBeginner is what a confused caller might build: a transaction that also
// claims to begin transactions.
type txBeginner struct{ wsql.Tx }

func (txBeginner) BeginTx(context.Context, *sql.TxOptions) (wsql.Tx, error) { return nil, nil }

func TestMigrateCreatesTheSchema(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	name := s.Name + "_new"
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{Schema: name})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = s.Pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = migrate.Migrate(context.Background(), s.Beginner, d) }()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.True(t, tableExists(t, s, name+".outbox_events"))
}
