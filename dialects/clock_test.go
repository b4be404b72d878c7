package dialects_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// The reading of the database's clock, in UTC, for the relay's clock check
// (poller.Config.MaxClockOffset), of every dialect. The reading that rides
// on the recovery is in the heartbeat golden files (EventsRecoverStale on
// PostgreSQL, the probe on MySQL and Oracle).
func TestDatabaseNowGolden(t *testing.T) {
	t.Parallel()
	pg, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	my := newMySQL(t, oncebox.TablesConfig{})
	ora := newOracle(t, oncebox.TablesConfig{})
	qs := []namedQuery{
		{"postgres DatabaseNow", pg.DatabaseNow()},
		{"mysql DatabaseNow", my.DatabaseNow()},
		{"oracle DatabaseNow", ora.DatabaseNow()},
	}
	for _, c := range qs {
		require.Empty(t, c.q.Args, "%s: no argument", c.name)
	}
	golden(t, "clock.sql", renderDollarQueries(qs))
}
