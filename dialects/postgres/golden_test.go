package postgres_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
)

func TestPostgreSQLMigrationsGolden(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
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
	golden.Check(t, "postgres_migrations.sql", b.String())
}

func TestPostgreSQLEventsInsertGolden(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	q := d.EventsInsertSQL([]dialects.EventRow{
		{ID: id1, EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: at},
		{ID: id2, EventType: "a", Topic: "ta", MessageUUID: "m2", Metadata: "{}", CreatedAt: at, NextRetryAt: at.Add(time.Hour)},
	})
	golden.Check(t, "postgres_events_insert.sql", q.SQL+"\n")
	require.Equal(t, []any{
		id1.String(), "a", "ta", "k", "m1", []byte("p"), "{}", at, at,
		id2.String(), "a", "ta", nil, "m2", []byte{}, "{}", at, at.Add(time.Hour),
	}, q.Args, "no key binds NULL, a nil payload binds empty bytes, a delayed row's next_retry_at is its time")

	// The one-row statement is built once and reused.
	one := d.EventsInsertSQL([]dialects.EventRow{{ID: id1, CreatedAt: at}})
	require.Equal(t, strings.Count(one.SQL, "$"), 10)
	require.Equal(t, 65535/9, d.MaxRowsPerInsert())
}

// The wake-up on commit: pg_notify binds the channel and the payload;
// LISTEN takes the channel as a quoted identifier (pgx's quoting).
func TestPostgreSQLNotify(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.Equal(t, dialects.Query{SQL: "SELECT pg_notify($1, $2)", Args: []any{"ch", "order-created"}}, d.NotifySQL("ch", "order-created"))
	require.Equal(t, dialects.Query{SQL: "SELECT pg_notification_queue_usage()"}, d.NotifyQueueUsageSQL())
	for _, channel := range []string{"oncebox_outbox_events_0123456789abcdef", `a"b`, "a\x00b"} {
		require.Equal(t, "LISTEN "+pgx.Identifier{channel}.Sanitize(), d.ListenSQL(channel).SQL, channel)
		require.Empty(t, d.ListenSQL(channel).Args)
	}
}

func TestPostgreSQLRelayGolden(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	var b strings.Builder
	for _, c := range []golden.Query{
		{"EventsClaim", d.EventsClaim(dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: golden.At, Instance: "host-1"})},
		{"EventsClaim (ordering: key)", d.EventsClaim(dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: golden.At, Instance: "host-1",
			ByKey: true})},
		{"EventsClaim (ordering: key, on-failure: block)", d.EventsClaim(dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: golden.At,
			Instance: "host-1", ByKey: true, BlockOnFailure: true})},
		{"EventsDueTypes (discovery, first page)", d.EventsDueTypes(golden.At, "", 100)},
		{"EventsDueTypes (discovery, next page)", d.EventsDueTypes(golden.At, "b", 100)},
		{"EventsMarkProcessed", d.EventsMarkProcessed(oncebox.EventID{0x01}, []oncebox.EventID{{0x0a}, {0x0b}}, golden.At)},
		{"EventsMarkProcessedClaims (a merged finalize: the token of each row's claim)", d.EventsMarkProcessedClaims([]dialects.ClaimIDs{
			{Token: oncebox.EventID{0x01}, IDs: []oncebox.EventID{{0x0a}, {0x0b}}},
			{Token: oncebox.EventID{0x02}, IDs: []oncebox.EventID{{0x0c}}},
		}, golden.At)},
	} {
		require.Len(t, c.Q.Args, golden.CountDollarParams(c.Q.SQL), "%s: one argument per placeholder", c.Name)
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.Name, c.Q.SQL, c.Q.Args)
	}
	golden.Check(t, "postgres_relay.sql", b.String())
}

func TestPostgreSQLFeatures(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.Equal(t, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, d.InboxTxOptions())
	require.Equal(t, "$3", postgres.Database.Placeholder(3))
	require.Len(t, d.MigrationLockSQL(), 1)
	require.Contains(t, d.MigrationLockSQL()[0].SQL, "pg_advisory_xact_lock")
	require.Empty(t, d.MigrationUnlockSQL(), "the transaction-level lock goes with the commit")

	// oncetest's schemas: made without IF NOT EXISTS (a test never takes
	// one it did not make), and only when the dialect names one.
	_, err = d.TestSchemaCreateSQL()
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	s, err := postgres.New(oncebox.TablesConfig{Schema: "svc"})
	require.NoError(t, err)
	create, err := s.TestSchemaCreateSQL()
	require.NoError(t, err)
	require.Equal(t, "CREATE SCHEMA svc", create.SQL)
	drop, err := s.TestSchemaDropSQL()
	require.NoError(t, err)
	require.Equal(t, "DROP SCHEMA IF EXISTS svc CASCADE", drop.SQL)
}

func TestPostgreSQLDLQGolden(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	at := golden.At
	var b strings.Builder
	for _, c := range append(golden.DLQStoreQueries(d),
		golden.Query{"DLQTransferToOutbox", d.DLQTransferToOutbox(at, 1000)},
		golden.Query{"DLQDeleteResolved", d.DLQDeleteResolved(at, 1000)},
		golden.Query{"DLQConsumerPayload", d.DLQConsumerPayloadSQL(oncebox.EventID{0x01}, "h")},
	) {
		require.Len(t, c.Q.Args, golden.CountDollarParams(c.Q.SQL), "%s: one argument per placeholder", c.Name)
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.Name, c.Q.SQL, c.Q.Args)
	}
	golden.Check(t, "postgres_dlq.sql", b.String())
}

// heartbeatRecoverParams are the golden files' recovery bounds: the
// defaults' 300s and 12s before golden.At.
var heartbeatRecoverParams = dialects.RecoverParams{Now: golden.At, ClaimedBefore: golden.At.Add(-300 * time.Second),
	StaleBefore: golden.At.Add(-12 * time.Second), Limit: 1000}

func TestPostgreSQLHeartbeatGolden(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	qs := []golden.Query{
		{"InstanceHeartbeat", d.InstanceHeartbeat("host-1", golden.At)},
		{"InstanceEnd", d.InstanceEnd("host-1")},
		{"InstancesDeleteBefore", d.InstancesDeleteBefore(golden.At.Add(-5 * time.Minute))},
		{"RecoverStale: EventsRecoverStale", d.EventsRecoverStale(heartbeatRecoverParams)},
	}
	for _, c := range qs {
		require.Len(t, c.Q.Args, golden.CountDollarParams(c.Q.SQL), "%s: one argument per placeholder", c.Name)
	}
	golden.Check(t, "postgres_heartbeat.sql", golden.Render(qs))
}

// The stale bound and the processing bound are each bound where they are
// used, in the order the placeholders appear: a swap would recover live
// instances' claims after the heartbeat timeout.
func TestRecoverStaleBindsEachBoundWhereItIsUsed(t *testing.T) {
	t.Parallel()
	p := heartbeatRecoverParams
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.Equal(t, []any{p.Now, p.StaleBefore, p.ClaimedBefore, p.Limit}, pg.EventsRecoverStale(p).Args)
}

// The relay's read of the next due time (dialects.NextDueReader): one
// probe of the claim index, binding the type and the time.
func TestPostgreSQLNextDueGolden(t *testing.T) {
	t.Parallel()
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	q := d.NextDueSQL("order-created", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	golden.Check(t, "postgres_next_due.sql", q.SQL+"\n")
	require.Equal(t, []any{"order-created", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}, q.Args, "the type and the time, as the dialect binds it")
}
