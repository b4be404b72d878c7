package mysql_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/mysql"
)

// The reading of the database's clock, in UTC, for the relay's clock check
// (poller.Config.MaxClockOffset): DatabaseTime's statement. The reading
// that rides on the recovery is in the heartbeat golden file
// (RecoverStale's probe).
func TestMySQLDatabaseNowGolden(t *testing.T) {
	t.Parallel()
	d, err := mysql.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	qs := []golden.Query{{Name: "mysql DatabaseNow", Q: d.DatabaseNow()}}
	for _, c := range qs {
		require.Empty(t, c.Q.Args, "%s: no argument", c.Name)
	}
	golden.Check(t, "mysql_clock.sql", golden.Render(qs))
}
