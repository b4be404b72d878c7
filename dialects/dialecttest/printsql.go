package dialecttest

import (
	"context"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// TestMigrationsAppliedByHand applies the text of migrate.Statements (what
// `oncebox migrate --print-sql` prints) the way a team's own tool would,
// with no Migrate: first up to the version before the latest, which the
// relay's start-up check refuses, then the rest. The check then accepts the
// tables, an event published there is relayed, and Migrate finds nothing
// left to do.
func testMigrationsAppliedByHand(t *testing.T, tg Target) {
	t.Parallel()
	s := &suite{Env: tg.NewEmpty(t), clock: clockwork.NewFakeClockAt(t0)}
	ctx := context.Background()
	db := s.DB
	if tg.OpenScriptDB != nil {
		// A file of several statements, as the database's client runs it
		// (MySQL: a handle with multiStatements).
		db = tg.OpenScriptDB(t)
	}
	apply := func(from, to int) {
		t.Helper()
		scripts, err := migrate.Statements(s.Dialect, from, to)
		require.NoError(t, err)
		for _, sc := range scripts {
			if tg.Name == "oracle" {
				// Text ends statements with SQL*Plus's "/": database/sql
				// takes them one at a time.
				for _, st := range sc.Statements {
					_, err := db.ExecContext(ctx, st)
					require.NoError(t, err, "%s: %s", sc.Name, st)
				}
				continue
			}
			_, err := db.ExecContext(ctx, sc.Text())
			require.NoError(t, err, "%s:\n%s", sc.Name, sc.Text())
		}
	}
	migrations, err := s.Dialect.Migrations()
	require.NoError(t, err)
	// By version, not count: an opt-in step (PostgreSQL's partitioning,
	// 1001) is numbered apart from the plain migrations.
	before := 0
	if len(migrations) > 1 {
		before = migrations[len(migrations)-2].Version
	}

	apply(0, before)
	require.ErrorContains(t, s.Dialect.CheckSchema(ctx, s.Beginner), migrations[len(migrations)-1].Name)
	apply(before, 0)
	require.NoError(t, s.Dialect.CheckSchema(ctx, s.Beginner))

	ids := s.publish(t, nil, "order-created", 3)
	rec := newRecorder()
	s.startPoller(t, nil, rec, fastPolling(s.pollerConfig("order-created")))
	pollertest.Eventually(t, "the events relayed", func() bool { return s.status(t, "PROCESSED") == len(ids) })
	for _, id := range ids {
		require.Len(t, rec.of(id), 1)
	}

	require.NoError(t, migrate.Migrate(ctx, s.Beginner, s.Dialect))
	require.Equal(t, len(migrations), s.Count(t, s.Tables.Migrations, ""), "Migrate found every version recorded")
}
