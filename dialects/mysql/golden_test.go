package mysql_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/mysql"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func newMySQL(t *testing.T, cfg oncebox.TablesConfig) *mysql.Dialect {
	t.Helper()
	d, err := mysql.New(cfg)
	require.NoError(t, err)
	return d
}

// renderQueries writes each query, its arguments and checks that every
// placeholder has its argument.
func renderQueries(t *testing.T, qs []golden.Query) string {
	t.Helper()
	var b strings.Builder
	for _, c := range qs {
		require.Equal(t, strings.Count(c.Q.SQL, "?"), len(c.Q.Args), "%s: one argument per placeholder", c.Name)
		require.LessOrEqual(t, len(c.Q.Args), 65535, "%s", c.Name)
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.Name, c.Q.SQL, c.Q.Args)
	}
	return b.String()
}

func TestMySQLMigrationsGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
	ms, err := d.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	var b strings.Builder
	for _, q := range append(append(d.MigrationLockSQL(), d.SchemaCreateSQL()...), d.MigrationsTableCreateSQL(), d.MigrationsSelectSQL(),
		d.MigrationsInsertSQL(1, "0001_init.sql", time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC))) {
		fmt.Fprintf(&b, "-- migrate\n%s;\n-- args: %v\n\n", q.SQL, q.Args)
	}
	for _, m := range ms {
		require.Positive(t, m.Version)
		for i, s := range m.Statements {
			require.NotContains(t, s, "{{", "%s statement %d is fully rendered", m.Name, i)
			if strings.HasPrefix(s, "CREATE TABLE") {
				require.Contains(t, s, "IF NOT EXISTS", "re-runnable after DDL's implicit commits")
				require.Contains(t, s, "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
			}
			require.NotContains(t, s, "CREATE INDEX", "indexes are inline")
			fmt.Fprintf(&b, "-- %s #%02d\n%s;\n\n", m.Name, i, s)
		}
	}
	for _, q := range d.MigrationUnlockSQL() {
		fmt.Fprintf(&b, "-- migrate\n%s;\n-- args: %v\n\n", q.SQL, q.Args)
	}
	golden.Check(t, "mysql_migrations.sql", b.String())
}

func TestMySQLFeatures(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	require.Equal(t, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, d.InboxTxOptions())
	require.Equal(t, "?", mysql.Database.Placeholder(3))
	require.Equal(t, 65535/9, d.MaxRowsPerInsert())
	require.Empty(t, d.SchemaCreateSQL(), "no schema, nothing to create")

	// oncetest's databases: made without IF NOT EXISTS (a test never takes
	// one it did not make) and with the server's defaults, only when the
	// dialect names one.
	_, err := d.TestSchemaCreateSQL()
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	s := newMySQL(t, oncebox.TablesConfig{Schema: "svc"})
	create, err := s.TestSchemaCreateSQL()
	require.NoError(t, err)
	require.Equal(t, "CREATE DATABASE svc", create.SQL)
	drop, err := s.TestSchemaDropSQL()
	require.NoError(t, err)
	require.Equal(t, "DROP DATABASE IF EXISTS svc", drop.SQL)

	id := oncebox.EventID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	enc := d.EncodeID(id)
	require.Equal(t, id[:], enc)
	enc.([]byte)[0] = 99
	require.Equal(t, byte(1), id[0], "EncodeID copies")

	for _, name := range []string{"mysql", "mariadb"} {
		got, err := registry.New(name, oncebox.TablesConfig{Schema: "svc"})
		require.NoError(t, err)
		require.Equal(t, "mysql", got.Name())
		require.Equal(t, "svc.outbox_events", got.Tables().Events)
	}
	_, err = mysql.New(oncebox.TablesConfig{Schema: "a.b"})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)

	// The inbox columns are VARBINARY(255): as wide as the longest key the
	// middleware accepts, so INSERT IGNORE never truncates one silently.
	require.Equal(t, 255, middleware.MaxKeyLength)
}

func TestMySQLEventsInsertGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	atUS := at.Truncate(time.Microsecond)
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	q := d.EventsInsertSQL([]dialects.EventRow{
		{ID: id1, EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: at},
		{ID: id2, EventType: "a", Topic: "ta", MessageUUID: "m2", Metadata: "{}", CreatedAt: at, NextRetryAt: at.Add(time.Hour)},
	})
	golden.Check(t, "mysql_events_insert.sql", q.SQL+"\n")
	require.Equal(t, []any{
		id1[:], "a", "ta", "k", "m1", []byte("p"), "{}", atUS, atUS,
		id2[:], "a", "ta", nil, "m2", []byte{}, "{}", atUS, atUS.Add(time.Hour),
	}, q.Args, "no key binds NULL, a nil payload binds empty bytes, times are whole microseconds, a delayed row's next_retry_at is its time")
	require.Equal(t, 18, strings.Count(q.SQL, "?"))

	// The biggest batch fits the bind parameter limit.
	rows := make([]dialects.EventRow, d.MaxRowsPerInsert())
	big := d.EventsInsertSQL(rows)
	require.LessOrEqual(t, len(big.Args), 65535)
	require.Equal(t, len(big.Args), strings.Count(big.SQL, "?"))
}

func TestMySQLRelayGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id1, id2, token := oncebox.EventID{0x01}, oncebox.EventID{0x02}, oncebox.EventID{0xee}
	ids := []oncebox.EventID{id1, id2}
	p := dialects.ClaimParams{EventType: "order-created", Limit: 200, Token: token, Now: at, Instance: "host-1"}
	ordered, blocking := p, p
	ordered.ByKey = true
	blocking.ByKey, blocking.BlockOnFailure = true, true
	failed := []dialects.FailedEvent{
		{ID: id1, Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: at.Add(time.Second), Error: "boom"},
		{ID: id2, Status: oncebox.StatusFailed, RetryCount: 5, NextRetryAt: at, Error: "gone"},
	}
	lease := dialects.Lease{Name: "outbox-clean-up", Owner: "i1", LockedAt: at, Until: at.Add(time.Minute)}
	rec := []dialects.EventRow{{ID: id1, EventType: "a", Topic: "ta", MessageUUID: "m1", Payload: []byte("p"),
		Metadata: `{"oncebox_event_id":"x"}`, CreatedAt: at}}
	golden.Check(t, "mysql_relay.sql", renderQueries(t, []golden.Query{
		{"EventsDueTypes (discovery, first page)", d.EventsDueTypes(at, "", 100)},
		{"EventsDueTypes (discovery, next page)", d.EventsDueTypes(at, "b", 100)},
		{"Claim: EventsClaimProbe", d.EventsClaimProbe(p)},
		{"Claim: EventsClaimSelect", d.EventsClaimSelect(p)},
		{"Claim: EventsClaimUpdate", d.EventsClaimUpdate(p, ids)},
		{"Claim by key 1/3: EventsClaimCandidates (plain read, idle polls end here)", d.EventsClaimCandidates(ordered)},
		{"Claim by key, on-failure block 1/3: EventsClaimCandidates", d.EventsClaimCandidates(blocking)},
		{"Claim by key 1/3 (window cut, candidates short): EventsClaimWalk", d.EventsClaimWalk(ordered)},
		{"Claim by key, on-failure block 1/3 (window cut, candidates short): EventsClaimWalk", d.EventsClaimWalk(blocking)},
		{"Claim by key 2/3: EventsClaimLockCandidates", d.EventsClaimLockCandidates(ordered, ids)},
		{"MarkProcessed: EventsMarkProcessed", d.EventsMarkProcessed(token, ids, at)},
		{"MarkProcessed (stale): EventsLockClaimed", d.EventsLockClaimed(token, ids)},
		{"EventsMarkFailed", d.EventsMarkFailed(token, failed, at)},
		{"EventsRelease", d.EventsRelease(token, ids, at)},
		{"EventsRecover", d.EventsRecover(at.Add(-time.Minute), at, 1000)},
		{"MoveToDLQ: EventsFailedProbe", d.EventsFailedProbe()},
		{"MoveToDLQ: EventsMoveSelect", d.EventsMoveSelect(1000)},
		{"MoveToDLQ: EventsCopyToDLQ", d.EventsCopyToDLQ(ids, at)},
		{"MoveToDLQ: EventsDelete (per row)", d.EventsDelete(id1)},
		{"EventsDeleteProcessed", d.EventsDeleteProcessed(at, 1000)},
		{"AcquireLease: LeaseInsert", d.LeaseInsert(lease)},
		{"AcquireLease: LeaseTake", d.LeaseTake(lease)},
		{"LeaseRelease", d.LeaseRelease(lease)},
		{"InboxInsert", d.InboxInsertSQL("ns", "k1", at)},
		{"InboxRecordMany: InboxSelectPresent", d.InboxSelectPresent("ns", []string{"k1", "k2"})},
		{"InboxRecordMany: InboxInsertMany", d.InboxInsertMany("ns", []string{"k1", "k2"}, at)},
		{"InboxDeleteBefore", d.InboxDeleteBeforeSQL(at, 1000)},
		{"DLQUpsertConsumer (event id)", d.DLQUpsertConsumerSQL(dialects.DLQRow{ID: id1, EventID: &id2, HandlerName: "h",
			EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m", Payload: []byte("p"), Metadata: "{}", Error: "e", FailedAt: at})},
		{"DLQUpsertConsumer (no event id)", d.DLQUpsertConsumerSQL(dialects.DLQRow{ID: id1, HandlerName: "h",
			EventType: "a", Topic: "ta", MessageUUID: "m", Metadata: "{}", Error: "e", FailedAt: at})},
		{"DLQConsumerPayload", d.DLQConsumerPayloadSQL(id2, "h")},
		{"TransferDLQToOutbox: DLQToRetryProbe", d.DLQToRetryProbe()},
		{"TransferDLQToOutbox: DLQTransferSelect", d.DLQTransferSelect(1000)},
		{"TransferDLQToOutbox: DLQTransferInsert", d.DLQTransferInsert(rec, at)},
		{"TransferDLQToOutbox: DLQDeleteID (per row)", d.DLQDeleteID(id1)},
		{"Backlog", d.BacklogSQL()},
	}))

	// A batch of MaxBatchSize failures fits in one statement.
	many := make([]dialects.FailedEvent, oncebox.MaxBatchSize)
	for i := range many {
		many[i] = dialects.FailedEvent{ID: oncebox.EventID{byte(i >> 8), byte(i)}, Status: oncebox.StatusPending, Error: "x"}
	}
	q := d.EventsMarkFailed(token, many, at)
	require.Equal(t, 3*oncebox.MaxBatchSize+3, len(q.Args))
	require.Equal(t, len(q.Args), strings.Count(q.SQL, "?"))
}

func TestMySQLDLQGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	golden.Check(t, "mysql_dlq.sql", renderQueries(t, append(golden.DLQStoreQueries(d),
		golden.Query{"DLQDeleteResolved", d.DLQDeleteResolved(golden.At, 1000)})))
}

func TestMySQLHeartbeatGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	golden.Check(t, "mysql_heartbeat.sql", renderQueries(t, []golden.Query{
		{"InstanceHeartbeat", d.InstanceHeartbeat("host-1", golden.At)},
		{"InstanceEnd", d.InstanceEnd("host-1")},
		{"InstancesDeleteBefore", d.InstancesDeleteBefore(golden.At.Add(-5 * time.Minute))},
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
	my := newMySQL(t, oncebox.TablesConfig{})
	require.Equal(t, []any{p.StaleBefore, p.ClaimedBefore, p.StaleBefore, p.Limit, p.Now}, my.EventsRecoverStale(p).Args)
}

// heartbeatRecoverParams are the golden files' recovery bounds: the
// defaults' 300s and 12s before golden.At.
var heartbeatRecoverParams = dialects.RecoverParams{Now: golden.At, ClaimedBefore: golden.At.Add(-300 * time.Second),
	StaleBefore: golden.At.Add(-12 * time.Second), Limit: 1000}

// The relay's read of the next due time (dialects.NextDueReader): one
// probe of the claim index, binding the type and the time.
func TestMySQLNextDueGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	q := d.NextDueSQL("order-created", time.Date(2026, 11, 30, 13, 0, 0, 1_500, time.FixedZone("CET", 3600)))
	golden.Check(t, "mysql_next_due.sql", q.SQL+"\n")
	require.Equal(t, []any{"order-created", time.Date(2026, 11, 30, 12, 0, 0, 1_000, time.UTC)}, q.Args, "the type and the time, as the dialect binds it")
}

func TestMySQLConsoleGolden(t *testing.T) {
	t.Parallel()
	d := newMySQL(t, oncebox.TablesConfig{})
	golden.Check(t, "mysql_console.sql", renderQueries(t, golden.ConsoleQueries(d.ConsoleStatements())))
}
