package migrate_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
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
	// Migration 4 added the key indexes of per-key ordering (keyed rows only).
	require.Equal(t, []string{"outbox_dlq_events_key_idx", "outbox_dlq_events_message_uq", "outbox_events_due_idx",
		"outbox_events_failed_idx", "outbox_events_in_process_idx", "outbox_events_key_idx", "outbox_events_processed_idx"}, idx)
}

func TestMigrateCreatesTheSchema(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	name := s.Name + "_new"
	d, err := postgres.New(oncebox.TablesConfig{Schema: name})
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

// foreign is a dialect of another package: Statements cannot tell how it
// writes the database's clock.
type foreign struct{ dialects.Dialect }

func TestStatements(t *testing.T) {
	t.Parallel()
	for name, record := range map[string]string{
		"postgres": "INSERT INTO billing.oncebox_migrations (version, name, applied_at) VALUES (2, '0002_claim_order.sql', now());",
		"mysql":    "INSERT INTO billing.oncebox_migrations (version, name, applied_at) VALUES (2, '0002_claim_order.sql', UTC_TIMESTAMP(6));",
		"oracle":   "INSERT INTO billing.oncebox_migrations (version, name, applied_at) VALUES (2, '0002_claim_order.sql', SYS_EXTRACT_UTC(SYSTIMESTAMP))\n/",
	} {
		d, err := registry.New(name, oncebox.TablesConfig{Schema: "billing"})
		require.NoError(t, err)
		all, err := migrate.Statements(d, 0, 0)
		require.NoError(t, err)
		migrations, err := d.Migrations()
		require.NoError(t, err)
		require.Len(t, all, len(migrations), name)
		for i, s := range all {
			require.Equal(t, migrations[i].Version, s.Version)
			require.Equal(t, migrations[i].Name, s.Name)
			// The bootstrap, the migration, the record.
			// (The creation of the migrations table; the text of each
			// statement is the dialect's, pinned by its golden tests.)
			boot := s.Statements[len(s.Statements)-len(migrations[i].Statements)-2]
			require.Contains(t, boot, "CREATE TABLE", name)
			require.Contains(t, boot, d.Tables().Migrations+" (", name)
			own := s.Statements[len(s.Statements)-len(migrations[i].Statements)-1 : len(s.Statements)-1]
			require.Equal(t, strings.Join(migrations[i].Statements, "\n;\n"), strings.Join(own, "\n;\n"), name) // (MySQL's 0002 has none)
		}

		two, err := migrate.Statements(d, 1, 2)
		require.NoError(t, err)
		require.Len(t, two, 1)
		require.Equal(t, 2, two[0].Version)
		require.True(t, strings.HasSuffix(two[0].Text(), "\n\n"+record+"\n"), "%s:\n%s", name, two[0].Text())
		if name == "postgres" { // MySQL's database and Oracle's user must exist
			require.Contains(t, two[0].Text(), "CREATE SCHEMA IF NOT EXISTS billing;\n")
		}
	}

	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	for _, r := range [][2]int{{2, 1}, {-1, 0}, {0, 99}, {6, 0}} {
		_, err := migrate.Statements(d, r[0], r[1])
		require.ErrorIs(t, err, oncebox.ErrInvalidInput, "from %d to %d", r[0], r[1])
		require.ErrorContains(t, err, "from "+strconv.Itoa(r[0]))
	}
	_, err = migrate.Statements(nil, 0, 0)
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	_, err = migrate.Statements(foreign{d}, 0, 0)
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	require.ErrorContains(t, err, "migrate_test.foreign")
}
