package sqlite_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
)

// check writes qs to the golden file name, each with one argument per
// placeholder (?n may be repeated: SQLite binds it once).
func check(t *testing.T, name string, qs []golden.Query) {
	t.Helper()
	for _, c := range qs {
		require.NotContains(t, c.Q.SQL, "$", "%s: ?n placeholders only", c.Name)
		require.Len(t, c.Q.Args, countParams(t, c.Q.SQL), "%s: one argument per placeholder", c.Name)
	}
	golden.Check(t, name, golden.Render(qs))
}

// countParams returns the parameters of sql: the highest ?n, or the
// number of anonymous ? (a statement never mixes the two).
func countParams(t *testing.T, sql string) int {
	t.Helper()
	if n := golden.CountDollarParams(strings.ReplaceAll(sql, "?", "$")); n > 0 {
		require.NotRegexp(t, `\?[^0-9]|\?$`, sql, "numbered and anonymous parameters mixed")
		return n
	}
	return strings.Count(sql, "?")
}

func newDialect(t *testing.T, cfg oncebox.TablesConfig) *sqlite.Dialect {
	t.Helper()
	d, err := sqlite.New(cfg)
	require.NoError(t, err)
	return d
}

// The migrations, rendered in a schema (an attached database) with a
// prefix: CREATE TABLE and CREATE INDEX take the schema on the name, the
// ON clause of an index the bare table name.
func TestSQLiteMigrationsGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
	ms, err := d.Migrations()
	require.NoError(t, err)
	require.Len(t, ms, 4, "PostgreSQL's four migrations, same versions")
	var b strings.Builder
	for _, m := range ms {
		for i, s := range m.Statements {
			require.NotContains(t, s, "{{", "%s statement %d is fully rendered", m.Name, i)
			require.NotContains(t, s, " ON svc.", "%s statement %d: SQLite refuses a schema in an index's ON", m.Name, i)
			fmt.Fprintf(&b, "-- %s #%02d\n%s;\n\n", m.Name, i, s)
		}
	}
	golden.Check(t, "sqlite_migrations.sql", b.String())
}

// Times are bound as INTEGER unix microseconds, ids as their 16 bytes.
func TestSQLiteEventsInsertGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	at := golden.At.Add(1500 * time.Nanosecond)
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	q := d.EventsInsertSQL([]dialects.EventRow{
		{ID: id1, EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: at},
		{ID: id2, EventType: "a", Topic: "ta", MessageUUID: "m2", Metadata: "{}", CreatedAt: at, NextRetryAt: at.Add(time.Hour)},
	})
	golden.Check(t, "sqlite_events_insert.sql", q.SQL+"\n")
	micros := golden.At.UnixMicro() + 1
	later := micros + time.Hour.Microseconds()
	require.Equal(t, []any{
		id1[:], "a", "ta", "k", "m1", []byte("p"), "{}", micros, micros, micros,
		id2[:], "a", "ta", nil, "m2", []byte{}, "{}", later, micros, micros,
	}, q.Args, "no key binds NULL, a nil payload binds empty bytes, a time its microseconds, a delayed row's next_retry_at its time")
	require.Equal(t, strings.Count(q.SQL, "?"), len(q.Args))
	require.Equal(t, 32766/10, d.MaxRowsPerInsert())
}

var (
	claimParams   = dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: golden.At, Instance: "host-1"}
	orderedParams = dialects.ClaimParams{EventType: "a", Limit: 200, Token: oncebox.EventID{0x01}, Now: golden.At, Instance: "host-1",
		ByKey: true, BlockOnFailure: true}
	lease = dialects.Lease{Name: "cleanup", Owner: "host-1", LockedAt: golden.At, Until: golden.At.Add(time.Minute)}
)

func TestSQLiteRelayGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	ids := []oncebox.EventID{{0x0a}, {0x0b}}
	check(t, "sqlite_relay.sql", []golden.Query{
		{"Claim: EventsClaimProbe", d.EventsClaimProbeSQL(claimParams)},
		{"Claim: EventsClaim", d.EventsClaimSQL(claimParams)},
		{"Claim (ordering: key, on-failure: block): EventsClaimCandidates", d.EventsClaimCandidatesSQL(orderedParams)},
		{"Claim (ordering: key): EventsClaimWalk", d.EventsClaimWalkSQL(orderedParams)},
		{"Claim (ordering: key): EventsClaimLockCandidates", d.EventsClaimLockCandidatesSQL(orderedParams, ids)},
		{"Claim (ordering: key): EventsClaimUpdate", d.EventsClaimUpdateSQL(orderedParams, ids)},
		{"EventsDueTypes (discovery, first page)", d.EventsDueTypesSQL(golden.At, "", 100)},
		{"EventsMarkProcessed", d.EventsMarkProcessedSQL(oncebox.EventID{0x01}, ids, golden.At)},
		{"EventsMarkFailed", d.EventsMarkFailedSQL(oncebox.EventID{0x01}, []dialects.FailedEvent{
			{ID: ids[0], Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: golden.At.Add(time.Second), Error: "e1"},
			{ID: ids[1], Status: oncebox.StatusFailed, RetryCount: 3, NextRetryAt: golden.At, Error: "e2"},
		}, golden.At)},
		{"EventsRelease", d.EventsReleaseSQL(oncebox.EventID{0x01}, ids, golden.At)},
		{"MoveToDLQ: EventsFailedProbe", d.EventsFailedProbeSQL()},
		{"MoveToDLQ: EventsCopyToDLQ", d.EventsCopyToDLQSQL(golden.At, 1000)},
		{"MoveToDLQ: EventsDeleteMoved", d.EventsDeleteMovedSQL(1000)},
		{"EventsDeleteProcessed", d.EventsDeleteProcessedSQL(golden.At, 1000)},
		{"LeaseAcquire", d.LeaseAcquireSQL(lease)},
		{"LeaseRelease", d.LeaseReleaseSQL(lease)},
	})
}

func TestSQLiteDLQGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	check(t, "sqlite_dlq.sql", append(golden.DLQStoreQueries(d),
		golden.Query{Name: "TransferDLQToOutbox: DLQToRetryProbe", Q: d.DLQToRetryProbeSQL()},
		golden.Query{Name: "TransferDLQToOutbox: DLQTransferSelect", Q: d.DLQTransferSelectSQL(1000)},
		golden.Query{Name: "TransferDLQToOutbox: DLQTransferInsert", Q: d.DLQTransferInsertSQL([]dialects.EventRow{
			{ID: oncebox.EventID{0x01}, EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: golden.At},
		}, golden.At)},
		golden.Query{Name: "TransferDLQToOutbox: DLQDeleteIDs", Q: d.DLQDeleteIDsSQL([]oncebox.EventID{{0x01}, {0x02}})},
		golden.Query{Name: "DLQDeleteResolved", Q: d.DLQDeleteResolvedSQL(golden.At, 1000)},
		golden.Query{Name: "DLQConsumerPayload", Q: d.DLQConsumerPayloadSQL(oncebox.EventID{0x01}, "h")},
	))
}

func TestSQLiteInboxGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	eid := oncebox.EventID{0x02}
	check(t, "sqlite_inbox.sql", []golden.Query{
		{"InboxInsert", d.InboxInsertSQL("c", "id-1", golden.At)},
		{"InboxInsertMany", d.InboxInsertManySQL("c", []string{"id-1", "id-2"}, golden.At)},
		{"InboxDeleteBefore", d.InboxDeleteBeforeSQL(golden.At, 1000)},
		{"PoisonUpsert (an event id)", d.DLQUpsertConsumerSQL(dialects.DLQRow{ID: oncebox.EventID{0x01}, EventID: &eid, HandlerName: "h",
			EventType: "a", Topic: "t", MessageUUID: "m", Payload: []byte("p"), Metadata: "{}", Error: "e", FailedAt: golden.At})},
		{"PoisonUpsert (no event id)", d.DLQUpsertConsumerSQL(dialects.DLQRow{ID: oncebox.EventID{0x01}, HandlerName: "h",
			EventType: "a", Topic: "t", MessageUUID: "m", Metadata: "{}", Error: "e", FailedAt: golden.At})},
	})
}

var recoverParams = dialects.RecoverParams{Now: golden.At, ClaimedBefore: golden.At.Add(-300 * time.Second),
	StaleBefore: golden.At.Add(-12 * time.Second), Limit: 1000}

func TestSQLiteHeartbeatGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	check(t, "sqlite_heartbeat.sql", []golden.Query{
		{"InstanceHeartbeat", d.InstanceHeartbeatSQL("host-1", golden.At)},
		{"InstanceEnd", d.InstanceEndSQL("host-1")},
		{"InstancesDeleteBefore", d.InstancesDeleteBeforeSQL(golden.At.Add(-5 * time.Minute))},
		{"RecoverStale: EventsInProcessProbe", d.EventsInProcessProbeSQL()},
		{"RecoverStale: EventsRecoverStale", d.EventsRecoverStaleSQL(recoverParams)},
		{"DatabaseNow", d.DatabaseNowSQL()},
	})
	// The stale bound and the processing bound are each bound where they
	// are used: a swap would recover live instances' claims after the
	// heartbeat timeout.
	p := recoverParams
	require.Equal(t, []any{p.Now.UnixMicro(), p.StaleBefore.UnixMicro(), p.ClaimedBefore.UnixMicro(), p.Limit},
		d.EventsRecoverStaleSQL(p).Args)
}

func TestSQLiteMigratorGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	qs := []golden.Query{}
	for i, q := range d.MigrationLockSQL() {
		qs = append(qs, golden.Query{Name: fmt.Sprintf("MigrationLock #%d", i+1), Q: q})
	}
	qs = append(qs,
		golden.Query{Name: "MigrationsTableCreate", Q: d.MigrationsTableCreateSQL()},
		golden.Query{Name: "MigrationsSelect", Q: d.MigrationsSelectSQL()},
		golden.Query{Name: "Backlog", Q: d.BacklogSQL()},
		golden.Query{Name: "EventsList", Q: d.EventsListSQL()},
	)
	check(t, "sqlite_migrator.sql", qs)
	// The migration's record keeps $n: sqlkit's script writer inlines $n.
	require.Equal(t, dialects.Query{SQL: "INSERT INTO oncebox_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
		Args: []any{1, "0001_init.sql", golden.At.UnixMicro()}}, d.MigrationsInsertSQL(1, "0001_init.sql", golden.At))
	require.Empty(t, d.MigrationUnlockSQL(), "the commit releases the write lock")

	// The printed script records the migration at the database's own
	// clock, in microseconds.
	ms, err := d.Migrations()
	require.NoError(t, err)
	script, err := d.MigrationScript(ms[0])
	require.NoError(t, err)
	last := script.Statements[len(script.Statements)-1]
	require.Contains(t, last, "CAST(unixepoch('subsec') * 1000000 AS INTEGER)")
}

func TestSQLiteFeatures(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	require.Nil(t, d.InboxTxOptions(), "no isolation level: SQLite's transactions are serializable")
	require.False(t, d.CanNotify(), "no notification on commit: the relay polls")
	require.Equal(t, "?", sqlite.Database.Placeholder(3), "anonymous, bound in text order")
	require.Equal(t, "sqlite", d.Name())
	id := oncebox.EventID{0x01}
	require.Equal(t, id[:], d.EncodeID(id), "an id is its 16 bytes")
	_, err := d.TestSchemaCreateSQL()
	require.ErrorIs(t, err, oncebox.ErrInvalidInput, "a test takes a file of its own")
	_, err = sqlite.New(oncebox.TablesConfig{Schema: "bad name"})
	require.ErrorContains(t, err, "bad name")
}

// sqliteError has the shape of modernc.org/sqlite's *Error: a type of a
// package whose path names sqlite, with Code() int.
type sqliteError struct{ code int }

func (e *sqliteError) Error() string { return fmt.Sprintf("sqlite error %d", e.code) }

func (e *sqliteError) Code() int { return e.code }

func TestSQLiteIsTransient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&sqliteError{5}, true},                                     // SQLITE_BUSY
		{&sqliteError{5 | 2<<8}, true},                              // SQLITE_BUSY_SNAPSHOT
		{&sqliteError{6}, true},                                     // SQLITE_LOCKED
		{&sqliteError{6 | 1<<8}, true},                              // SQLITE_LOCKED_SHAREDCACHE
		{fmt.Errorf("claim: %w", &sqliteError{5}), true},            // wrapped
		{&sqliteError{19}, false},                                   // SQLITE_CONSTRAINT
		{&sqliteError{1}, false},                                    // SQLITE_ERROR
		{errors.New("database is locked (5) (SQLITE_BUSY)"), false}, // no code, no sqlite type
	} {
		require.Equal(t, c.want, sqlite.IsTransient(c.err), "%v", c.err)
	}
}

// The relay's read of the next due time (dialects.NextDueReader): one
// probe of the claim index, binding the type and the time.
func TestSQLiteNextDueGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	q := d.NextDueSQL("order-created", time.Date(2026, 11, 30, 13, 0, 0, 1_500, time.FixedZone("CET", 3600)))
	golden.Check(t, "sqlite_next_due.sql", q.SQL+"\n")
	require.Equal(t, []any{"order-created", int64(1796040000000001)}, q.Args, "the type and the time, as the dialect binds it")
}

func TestSQLiteConsoleGolden(t *testing.T) {
	t.Parallel()
	d := newDialect(t, oncebox.TablesConfig{})
	check(t, "sqlite_console.sql", golden.ConsoleQueries(d.ConsoleStatements()))
}
