package dialects_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// The reading of the database's clock, in UTC, for the relay's clock check
// (poller.Config.MaxClockOffset), of every dialect. The reading that rides
// on the recovery is in the heartbeat golden files (EventsRecoverStale on
// PostgreSQL, the probe on MySQL and Oracle).
func TestDatabaseNowGolden(t *testing.T) {
	t.Parallel()
	var qs []golden.Query
	for _, db := range registry.All() {
		d, err := db.New(oncebox.TablesConfig{})
		require.NoError(t, err)
		qs = append(qs, golden.Query{Name: db.Name + " DatabaseNow", Q: d.DatabaseNow()})
	}
	for _, c := range qs {
		require.Empty(t, c.Q.Args, "%s: no argument", c.Name)
	}
	golden.Check(t, "clock.sql", golden.Render(qs))
}
