package migrate_test

import (
	"context"
	"sync"
	"testing"

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

// The behaviour of Migrate on every database (idempotent, concurrent,
// prefixed, refusing a transaction) is tested by the conformance suite; this
// file keeps what is PostgreSQL's own: the partial indexes and the schema.

func TestMigrateCreatesThePartialIndexes(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	ctx := context.Background()
	require.NoError(t, migrate.Migrate(ctx, s.Beginner, s.Dialect))

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
	// Migration 2 replaced outbox_events_pending_idx with outbox_events_due_idx
	// (the same partial index, with id, for the claim's order).
	require.Equal(t, []string{"outbox_dlq_events_message_uq", "outbox_events_due_idx", "outbox_events_failed_idx",
		"outbox_events_in_process_idx", "outbox_events_processed_idx"}, idx)
}

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
