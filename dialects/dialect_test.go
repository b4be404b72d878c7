package dialects_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./dialects -update to create %s", path)
	require.Equal(t, string(want), got)
}

func TestTablesAreQualifiedAndValidated(t *testing.T) {
	t.Parallel()
	tb, err := dialects.NewTables(oncebox.TablesConfig{Schema: "svc", Prefix: "billing_"})
	require.NoError(t, err)
	require.Equal(t, dialects.Tables{
		Events: "svc.billing_outbox_events", DLQ: "svc.billing_outbox_dlq_events",
		Inbox: "svc.billing_inbox_events", Jobs: "svc.billing_outbox_jobs",
		Migrations: "svc.billing_oncebox_migrations", Instances: "svc.billing_outbox_instances", Prefix: "billing_",
	}, tb)

	for _, bad := range []oncebox.TablesConfig{
		{Schema: "svc; DROP TABLE x"}, {Schema: "a.b"}, {Schema: `"quoted"`}, {Prefix: "p-"},
		{Prefix: "1abc"}, {Prefix: strings.Repeat("p", 41)}, {Schema: "sch ema"},
	} {
		_, err := dialects.NewPostgreSQL(bad)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, "%+v", bad)
	}
}

func TestPlaceholderStyles(t *testing.T) {
	t.Parallel()
	require.Equal(t, "$3", dialects.PlaceholderDollar.Format(3))
	require.Equal(t, "?", dialects.PlaceholderQuestion.Format(3))
	require.Equal(t, ":3", dialects.PlaceholderColon.Format(3))
}

func TestPostgreSQLMigrationsGolden(t *testing.T) {
	t.Parallel()
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
	require.NoError(t, err)
	ms, err := d.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	var b strings.Builder
	for _, m := range ms {
		require.Positive(t, m.Version)
		for i, s := range m.Statements {
			require.NotContains(t, s, "{{", "%s statement %d is fully rendered", m.Name, i)
			fmt.Fprintf(&b, "-- %s #%02d\n%s;\n\n", m.Name, i, s)
		}
	}
	golden(t, "postgres_migrations.sql", b.String())
}

func TestPostgreSQLEventsInsertGolden(t *testing.T) {
	t.Parallel()
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	q := d.EventsInsert([]dialects.EventRow{
		{ID: id1, EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: at},
		{ID: id2, EventType: "a", Topic: "ta", MessageUUID: "m2", Metadata: "{}", CreatedAt: at},
	})
	golden(t, "postgres_events_insert.sql", q.SQL+"\n")
	require.Equal(t, []any{
		id1.String(), "a", "ta", "k", "m1", []byte("p"), "{}", at,
		id2.String(), "a", "ta", nil, "m2", []byte{}, "{}", at,
	}, q.Args, "no key binds NULL, a nil payload binds empty bytes")

	// The one-row statement is built once and reused.
	one := d.EventsInsert([]dialects.EventRow{{ID: id1, CreatedAt: at}})
	require.Equal(t, strings.Count(one.SQL, "$"), 10)
	require.Equal(t, 65535/8, d.MaxRowsPerInsert())
}

func TestPostgreSQLRelayGolden(t *testing.T) {
	t.Parallel()
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	var b strings.Builder
	for _, c := range []namedQuery{
		{"EventsClaim", d.EventsClaim(dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: goldenAt, Instance: "host-1"})},
		{"EventsClaim (ordering: key)", d.EventsClaim(dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: goldenAt, Instance: "host-1",
			ByKey: true})},
		{"EventsClaim (ordering: key, on-failure: block)", d.EventsClaim(dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: goldenAt,
			Instance: "host-1", ByKey: true, BlockOnFailure: true})},
		{"EventsDueTypes (discovery, first page)", d.EventsDueTypes(goldenAt, "", 100)},
		{"EventsDueTypes (discovery, next page)", d.EventsDueTypes(goldenAt, "b", 100)},
		{"EventsMarkProcessed", d.EventsMarkProcessed(oncebox.EventID{0x01}, []oncebox.EventID{{0x0a}, {0x0b}}, goldenAt)},
		{"EventsMarkProcessedClaims (a merged finalize: the token of each row's claim)", d.EventsMarkProcessedClaims([]dialects.ClaimIDs{
			{Token: oncebox.EventID{0x01}, IDs: []oncebox.EventID{{0x0a}, {0x0b}}},
			{Token: oncebox.EventID{0x02}, IDs: []oncebox.EventID{{0x0c}}},
		}, goldenAt)},
	} {
		require.Len(t, c.q.Args, countDistinctParams(c.q.SQL), "%s: one argument per placeholder", c.name)
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.name, c.q.SQL, c.q.Args)
	}
	golden(t, "postgres_relay.sql", b.String())
}

func TestPostgreSQLFeatures(t *testing.T) {
	t.Parallel()
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	f := d.Features()
	require.Equal(t, dialects.PlaceholderDollar, f.Placeholder)
	require.True(t, f.Returning)
	require.Equal(t, dialects.SkipLockedCTE, f.SkipLocked)
	require.Equal(t, "uuid", f.IDType)
	require.Equal(t, dialects.InsertOnConflictDoNothing, f.InsertIgnore)
	require.Len(t, d.MigrationLock(), 1)
	require.Contains(t, d.MigrationLock()[0].SQL, "pg_advisory_xact_lock")
	require.Empty(t, d.MigrationUnlock(), "the transaction-level lock goes with the commit")
}

func TestPostgreSQLDLQGolden(t *testing.T) {
	t.Parallel()
	d, err := dialects.NewPostgreSQL(oncebox.TablesConfig{})
	require.NoError(t, err)
	at := goldenAt
	var b strings.Builder
	for _, c := range append(dlqStoreQueries(d),
		namedQuery{"DLQTransferToOutbox", d.DLQTransferToOutbox(at, 1000)},
		namedQuery{"DLQDeleteResolved", d.DLQDeleteResolved(at, 1000)},
		namedQuery{"DLQConsumerPayload", d.DLQConsumerPayload(oncebox.EventID{0x01}, "h")},
	) {
		require.Len(t, c.q.Args, countDistinctParams(c.q.SQL), "%s: one argument per placeholder", c.name)
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.name, c.q.SQL, c.q.Args)
	}
	golden(t, "postgres_dlq.sql", b.String())
}

// countDistinctParams returns the highest $n of sql.
func countDistinctParams(sql string) int {
	high := 0
	for i := 0; i < len(sql); i++ {
		if sql[i] != '$' {
			continue
		}
		n := 0
		for j := i + 1; j < len(sql) && sql[j] >= '0' && sql[j] <= '9'; j++ {
			n = n*10 + int(sql[j]-'0')
		}
		high = max(high, n)
	}
	return high
}

// namedQuery is one statement of a golden file, under its name.
type namedQuery struct {
	name string
	q    dialects.Query
}

// goldenAt is the time every golden statement is built at.
var goldenAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// dlqStoreQueries is every DLQ store statement of d, in the order and with
// the arguments of the golden files of all three dialects.
func dlqStoreQueries(d dialects.Dialect) []namedQuery {
	at := goldenAt
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	full := dialects.DLQFilter{
		Statuses:  []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusResolved},
		EventType: "order-created", Source: oncebox.DLQSourceConsumer,
		MovedFrom: at.Add(-time.Hour), MovedTo: at,
	}
	from := []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusResolved}
	return []namedQuery{
		{"DLQGet", d.DLQGet(id1)},
		{"DLQGetStatus", d.DLQGetStatus(id1)},
		{"DLQList (no filter, first page)", d.DLQList(dialects.DLQFilter{}, nil, 51)},
		{"DLQList (every filter, after a key)", d.DLQList(full, &dialects.DLQKey{MovedAt: at, ID: id1}, 51)},
		{"DLQCount (no filter)", d.DLQCount(dialects.DLQFilter{})},
		{"DLQCount (every filter)", d.DLQCount(full)},
		{"DLQSetStatus", d.DLQSetStatus(id1, oncebox.DLQStatusToRetry, from, at)},
		{"DLQSetStatusMany", d.DLQSetStatusMany([]oncebox.EventID{id1, id2}, oncebox.DLQStatusToRetry, from, at)},
		{"DLQSetStatusWhere (no filter)", d.DLQSetStatusWhere(dialects.DLQFilter{}, oncebox.DLQStatusToRetry, from, at)},
		{"DLQSetStatusWhere (every filter)", d.DLQSetStatusWhere(full, oncebox.DLQStatusToRetry, from, at)},
		{"DLQDelete", d.DLQDelete(id1)},
		{"DLQDeleteMany", d.DLQDeleteMany([]oncebox.EventID{id1, id2})},
		{"DLQDeleteWhere (no filter)", d.DLQDeleteWhere(dialects.DLQFilter{})},
		{"DLQDeleteWhere (every filter)", d.DLQDeleteWhere(full)},
	}
}
