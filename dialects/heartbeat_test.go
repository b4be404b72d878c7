package dialects_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// heartbeatRecoverParams are the golden files' recovery bounds: the
// defaults' 300s and 12s before goldenAt.
var heartbeatRecoverParams = dialects.RecoverParams{Now: goldenAt, ClaimedBefore: goldenAt.Add(-300 * time.Second),
	StaleBefore: goldenAt.Add(-12 * time.Second), Limit: 1000}

func TestPostgreSQLHeartbeatGolden(t *testing.T) {
	t.Parallel()
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	qs := []namedQuery{
		{"InstanceHeartbeat", d.InstanceHeartbeat("host-1", goldenAt)},
		{"InstanceEnd", d.InstanceEnd("host-1")},
		{"InstancesDeleteBefore", d.InstancesDeleteBefore(goldenAt.Add(-5 * time.Minute))},
		{"RecoverStale: EventsRecoverStale", d.EventsRecoverStale(heartbeatRecoverParams)},
	}
	for _, c := range qs {
		require.Len(t, c.q.Args, countDistinctParams(c.q.SQL), "%s: one argument per placeholder", c.name)
	}
	golden(t, "postgres_heartbeat.sql", renderDollarQueries(qs))
}

func TestMySQLHeartbeatGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	golden(t, "mysql_heartbeat.sql", renderQueries(t, []namedQuery{
		{"InstanceHeartbeat", d.InstanceHeartbeat("host-1", goldenAt)},
		{"InstanceEnd", d.InstanceEnd("host-1")},
		{"InstancesDeleteBefore", d.InstancesDeleteBefore(goldenAt.Add(-5 * time.Minute))},
		{"RecoverStale probe: EventsInProcessProbe (plain read, idle runs end here)", d.EventsInProcessProbe()},
		{"RecoverStale: EventsRecoverStale", d.EventsRecoverStale(heartbeatRecoverParams)},
	}))
}

// The stale bound and the processing bound are each bound where they are
// used, in the order the placeholders appear: a swap would recover live
// instances' claims after the heartbeat timeout.
func TestRecoverStaleBindsEachBoundWhereItIsUsed(t *testing.T) {
	t.Parallel()
	p := heartbeatRecoverParams
	pg, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.Equal(t, []any{p.Now, p.StaleBefore, p.ClaimedBefore, p.Limit}, pg.EventsRecoverStale(p).Args)

	my := newMySQL(t, oncebox.TablesConfig{})
	require.Equal(t, []any{p.StaleBefore, p.ClaimedBefore, p.StaleBefore, p.Limit, p.Now}, my.EventsRecoverStale(p).Args)

	ora := newOracle(t, oncebox.TablesConfig{})
	q := ora.EventsRecoverStale(p)
	requireOracleBinds(t, "EventsRecoverStale", q)
	bounds := []any{p.StaleBefore, p.ClaimedBefore, p.StaleBefore}
	require.Equal(t, append(append(append([]any{p.Now}, bounds...), bounds...), p.Limit), q.Args)
}

// renderDollarQueries writes each query and its arguments, as the
// PostgreSQL golden files do.
func renderDollarQueries(qs []namedQuery) string {
	var b strings.Builder
	for _, c := range qs {
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.name, c.q.SQL, c.q.Args)
	}
	return b.String()
}
