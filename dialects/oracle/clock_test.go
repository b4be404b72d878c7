package oracle_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/oracle"
)

// The reading of the database's clock, in UTC, for the relay's clock check
// (poller.Config.MaxClockOffset): DatabaseTime's statement. The reading
// that rides on the recovery is in the heartbeat golden file
// (RecoverStale's probe).
func TestOracleDatabaseNowGolden(t *testing.T) {
	t.Parallel()
	d, err := oracle.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	qs := []golden.Query{{Name: "oracle DatabaseNow", Q: d.DatabaseNow()}}
	for _, c := range qs {
		require.Empty(t, c.Q.Args, "%s: no argument", c.Name)
	}
	golden.Check(t, "oracle_clock.sql", golden.Render(qs))
}
