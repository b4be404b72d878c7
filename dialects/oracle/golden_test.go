package oracle_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/golden"
	"github.com/oncebox/watermill-oncebox/dialects/oracle"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

func newOracle(t *testing.T, cfg oncebox.TablesConfig) *oracle.Dialect {
	t.Helper()
	d, err := oracle.New(cfg)
	require.NoError(t, err)
	return d
}

func TestOracleIsRegistered(t *testing.T) {
	t.Parallel()
	d, err := registry.New("oracle", oncebox.TablesConfig{Prefix: "p_"})
	require.NoError(t, err)
	require.Equal(t, "oracle", d.Name())
	require.Equal(t, "p_outbox_events", d.Tables().Events)
	_, err = oracle.New(oncebox.TablesConfig{Schema: "svc; DROP TABLE x"})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
}

func TestOracleFeatures(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{})
	require.Nil(t, d.InboxTxOptions(), "READ COMMITTED is the default, which go-ora refuses to set")
	require.Equal(t, ":3", oracle.Database.Placeholder(3))
	id := oncebox.EventID{0x01, 0x02, 0x0f}
	require.Equal(t, id[:], d.EncodeID(id))
	require.Empty(t, d.SchemaCreateSQL(), "an Oracle schema is a user: never created")
	require.Len(t, d.MigrationLockSQL(), 1)
	require.Contains(t, d.MigrationLockSQL()[0].SQL, "DBMS_LOCK.REQUEST")
	require.Contains(t, d.MigrationLockSQL()[0].SQL, "FALSE", "release_on_commit FALSE: DDL commits")
	require.Len(t, d.MigrationUnlockSQL(), 1)
	require.Contains(t, d.MigrationUnlockSQL()[0].SQL, "DBMS_LOCK.RELEASE")
	// No test schema: a schema is a user (registry: TestSchema false).
	require.ErrorIs(t, d.CreateTestSchema(context.Background(), nil), errors.ErrUnsupported)
	require.ErrorIs(t, d.DropTestSchema(context.Background(), nil), errors.ErrUnsupported)
	require.False(t, oracle.Database.TestSchema)
}

func TestOracleMigrationsGolden(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
	ms, err := d.Migrations()
	require.NoError(t, err)
	require.Len(t, ms, 4)
	var b strings.Builder
	creates, drops, alters := 0, 0, 0
	for k, m := range ms {
		require.Equal(t, k+1, m.Version)
		for i, s := range m.Statements {
			require.NotContains(t, s, "{{", "%s statement %d is fully rendered", m.Name, i)
			require.True(t, strings.HasPrefix(s, "BEGIN\n"), "statement %d is a PL/SQL block: %s", i, s)
			require.True(t, strings.HasSuffix(s, "END;"), "statement %d keeps the END; a block needs", i)
			require.NotContains(t, s, "\n/", "the / separators are not sent")
			require.Equal(t, 1, strings.Count(s, "EXECUTE IMMEDIATE"), "one DDL per block")
			switch {
			case strings.Contains(s, "DROP INDEX"):
				require.Contains(t, s, "SQLCODE != -1418", "statement %d is re-runnable: an index already gone is fine", i)
				drops++
			case strings.Contains(s, "ALTER TABLE"):
				require.Contains(t, s, "SQLCODE != -1430", "statement %d is re-runnable: a column already added is fine", i)
				alters++
			default:
				require.Contains(t, s, "SQLCODE NOT IN (-955, -1408)", "statement %d is re-runnable", i)
				creates++
			}
			fmt.Fprintf(&b, "-- %s #%02d\n%s\n/\n\n", m.Name, i, s)
		}
	}
	require.Equal(t, 16, creates, "4 tables, 8 indexes; migration 2: the claim index with id; migration 3: the instances table; migration 4: the key indexes")
	require.Equal(t, 1, drops, "migration 2 drops the claim index without id")
	require.Equal(t, 1, alters, "migration 3 adds claimed_by")
	golden.Check(t, "oracle_migrations.sql", b.String())
}

func TestOracleEventsInsert(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{})
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.FixedZone("X", 3600))
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	rows := []dialects.EventRow{
		{ID: id1, EventType: "a", Topic: "ta", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: at},
		{ID: id2, EventType: "a", Topic: "ta", MessageUUID: "m2", Metadata: "{}", CreatedAt: at, NextRetryAt: at.Add(time.Hour)},
	}
	q := d.EventsInsertSQL(rows)
	u := at.UTC()
	require.Equal(t, []any{
		id1[:], "a", "ta", "k", "m1", []byte("p"), "{}", u, u, u,
		id2[:], "a", "ta", nil, "m2", []byte{}, "{}", u.Add(time.Hour), u, u,
	}, q.Args, "no key binds NULL; times are bound in UTC, once per use; a delayed row's next_retry_at is its time")
	one := d.EventsInsertSQL(rows[:1])
	require.True(t, strings.HasPrefix(one.SQL, "INSERT INTO outbox_events"), "one row: a plain INSERT")
	require.Equal(t, 999/12, d.MaxRowsPerInsert(), "INSERT ALL: at most 999 target columns in all")
	var many []dialects.EventRow
	for i := 0; i < d.MaxRowsPerInsert(); i++ {
		many = append(many, dialects.EventRow{ID: oncebox.EventID{byte(i), byte(i >> 8)}, CreatedAt: at})
	}
	big := d.EventsInsertSQL(many)
	require.LessOrEqual(t, len(big.Args), 65535)
	require.LessOrEqual(t, strings.Count(big.SQL, "\n  INTO ")*strings.Count(oracle.EventInsertColumnsForTest, ",")+strings.Count(big.SQL, "\n  INTO "), 999)
	requireOracleBinds(t, "EventsInsert max", big)
}

// oracleStatements returns every statement the Oracle dialect builds, named.
func oracleStatements(d *oracle.Dialect) []golden.Query {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id1, id2, tok := oncebox.EventID{0x01}, oncebox.EventID{0x02}, oncebox.EventID{0x0f}
	claim := dialects.ClaimParams{EventType: "order-created", Limit: 100, Token: tok, Now: at, Instance: "host-1"}
	ordered, blocking := claim, claim
	ordered.ByKey = true
	blocking.ByKey, blocking.BlockOnFailure = true, true
	lease := dialects.Lease{Name: "outbox-clean-up", Owner: "host-1", LockedAt: at, Until: at.Add(time.Minute)}
	tr := dialects.EventRow{ID: id1, EventType: "order-created", Topic: "orders", Key: "k",
		MessageUUID: "m1", Payload: []byte("p"), Metadata: `{"oncebox_event_id":"x"}`, CreatedAt: at.Add(-time.Hour)}
	qs := []golden.Query{
		{"MigrationLock", d.MigrationLockSQL()[0]},
		{"MigrationUnlock", d.MigrationUnlockSQL()[0]},
		{"MigrationsTableCreate", d.MigrationsTableCreateSQL()},
		{"MigrationsSelect", d.MigrationsSelectSQL()},
		{"MigrationsInsert", d.MigrationsInsertSQL(1, "0001_init.sql", at)},
		{"EventsInsert (one row)", d.EventsInsertSQL([]dialects.EventRow{{ID: id1, EventType: "a", Topic: "t", MessageUUID: "m", Metadata: "{}", CreatedAt: at}})},
		{"EventsInsert (two rows)", d.EventsInsertSQL([]dialects.EventRow{
			{ID: id1, EventType: "a", Topic: "t", Key: "k", MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", CreatedAt: at},
			{ID: id2, EventType: "a", Topic: "t", MessageUUID: "m2", Metadata: "{}", CreatedAt: at}})},
		{"EventsDueTypes (discovery, first page)", d.EventsDueTypes(at, "", 100)},
		{"EventsDueTypes (discovery, next page)", d.EventsDueTypes(at, "b", 100)},
		{"Claim probe: EventsClaimProbe (plain read, idle polls end here)", d.EventsClaimProbe(claim)},
		{"Claim 1/2: EventsClaimLock (cursor)", d.EventsClaimLock(claim)},
		{"Claim 2/2: EventsClaimUpdate", d.EventsClaimUpdate(claim, []oncebox.EventID{id1, id2})},
		{"Claim by key 1/3: EventsClaimCandidates (plain read, idle polls end here)", d.EventsClaimCandidates(ordered)},
		{"Claim by key, on-failure block 1/3: EventsClaimCandidates", d.EventsClaimCandidates(blocking)},
		{"Claim by key 1/3 (window cut, candidates short): EventsClaimWalk", d.EventsClaimWalk(ordered)},
		{"Claim by key, on-failure block 1/3 (window cut, candidates short): EventsClaimWalk", d.EventsClaimWalk(blocking)},
		{"Claim by key 2/3: EventsClaimLockCandidates (cursor)", d.EventsClaimLockCandidates(ordered, []oncebox.EventID{id1, id2})},
		{"MarkProcessed 1/2: EventsMarkProcessed", d.EventsMarkProcessed(tok, []oncebox.EventID{id1, id2}, at)},
		{"MarkProcessed (stale): EventsLockClaimed", d.EventsLockClaimed(tok, []oncebox.EventID{id1, id2})},
		{"MarkProcessed, outbox.finalize: delete: EventsMarkProcessed", d.DeleteConfirmed().(*oracle.Dialect).EventsMarkProcessed(tok, []oncebox.EventID{id1, id2}, at)},
		{"EventsMarkFailed", d.EventsMarkFailed(tok, []dialects.FailedEvent{
			{ID: id1, Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: at.Add(time.Second), Error: "boom"},
			{ID: id2, Status: oncebox.StatusFailed, RetryCount: 5, NextRetryAt: at, Error: "bang"}}, at)},
		{"EventsRelease", d.EventsRelease(tok, []oncebox.EventID{id1, id2}, at)},
		{"EventsRecover", d.EventsRecover(at.Add(-time.Minute), at, 1000)},
		{"MoveToDLQ probe: EventsFailedProbe", d.EventsFailedProbe()},
		{"MoveToDLQ 1/3: EventsMoveLock (cursor)", d.EventsMoveLock()},
		{"MoveToDLQ 2/3: EventsMoveCopy", d.EventsMoveCopy([]oncebox.EventID{id1, id2}, at)},
		{"MoveToDLQ 3/3: EventsMoveDelete", d.EventsMoveDelete([]oncebox.EventID{id1, id2})},
		{"EventsDeleteProcessed", d.EventsDeleteProcessed(at, 1000)},
		{"AcquireLease: LeaseAcquire", d.LeaseAcquire(lease)},
		{"LeaseRelease", d.LeaseRelease(lease)},
		{"InboxInsert", d.InboxInsertSQL("billing", "e-1", at)},
		{"InboxInsert (default namespace)", d.InboxInsertSQL("", "e-1", at)},
		{"InboxDeleteBefore", d.InboxDeleteBeforeSQL(at, 1000)},
		{"DLQUpsertConsumer (event id)", d.DLQUpsertConsumerSQL(dialects.DLQRow{ID: id2, EventID: &id1, HandlerName: "h",
			EventType: "order-created", Topic: "orders", Key: "k", MessageUUID: "m1", Payload: []byte("p"),
			Metadata: "{}", Error: "boom", FailedAt: at})},
		{"DLQUpsertConsumer (no event id, handler '')", d.DLQUpsertConsumerSQL(dialects.DLQRow{ID: id2, EventType: "order-created",
			Topic: "orders", MessageUUID: "m1", Metadata: "{}", Error: "boom", FailedAt: at})},
		{"DLQConsumerPayload (handler '')", d.DLQConsumerPayloadSQL(id1, "")},
		{"Backlog", d.BacklogSQL()},
	}
	qs = append(qs, golden.DLQStoreQueries(d)...)
	return append(qs, []golden.Query{
		{"TransferDLQToOutbox probe: DLQToRetryProbe", d.DLQToRetryProbe()},
		{"TransferDLQToOutbox 1/4: DLQTransferLock (cursor)", d.DLQTransferLock()},
		{"TransferDLQToOutbox 2/4: DLQTransferRearm", d.DLQTransferRearm(tr, at)},
		{"TransferDLQToOutbox 3/4: DLQTransferInsert (when not re-armed)", d.DLQTransferInsert(tr, at)},
		{"TransferDLQToOutbox 4/4: DLQTransferDelete", d.DLQTransferDelete([]oncebox.EventID{id1, id2})},
		{"DLQDeleteResolved", d.DLQDeleteResolved(at, 1000)},
		// Heartbeats (migration 3).
		{"InstanceHeartbeat", d.InstanceHeartbeat("host-1", at)},
		{"InstanceEnd", d.InstanceEnd("host-1")},
		{"InstancesDeleteBefore", d.InstancesDeleteBefore(at.Add(-5 * time.Minute))},
		{"RecoverStale probe: EventsInProcessProbe (plain read, idle runs end here)", d.EventsInProcessProbe()},
		{"RecoverStale: EventsRecoverStale", d.EventsRecoverStale(heartbeatRecoverParams)},
	}...)
}

func TestOracleStatementsGolden(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{})
	var b strings.Builder
	for _, c := range oracleStatements(d) {
		requireOracleBinds(t, c.Name, c.Q)
		fmt.Fprintf(&b, "-- %s\n%s\n/\n-- args: %s\n\n", c.Name, c.Q.SQL, formatArgs(c.Q.Args))
	}
	golden.Check(t, "oracle_statements.sql", b.String())
}

// TestOracleStatementRules checks, on every statement, what Oracle refuses
// or what silently breaks on it.
func TestOracleStatementRules(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
	for _, c := range oracleStatements(d) {
		s := strings.ToUpper(c.Q.SQL)
		if strings.Contains(s, "FOR UPDATE") {
			require.NotContains(t, s, "FETCH FIRST", "%s: FETCH FIRST with FOR UPDATE is ORA-02014", c.Name)
			require.NotContains(t, s, "ROWNUM", "%s: ROWNUM filters before SKIP LOCKED skips", c.Name)
			require.NotContains(t, s, " LIMIT ", c.Name)
			if !strings.Contains(c.Name, "EventsLockClaimed") {
				// EventsLockClaimed must wait for a row the recovery holds,
				// then see whether it is still this claim's: no SKIP LOCKED.
				require.Contains(t, s, "SKIP LOCKED", c.Name)
			}
		}
		plsql := strings.HasPrefix(s, "BEGIN") || strings.HasPrefix(s, "DECLARE")
		if !plsql {
			require.False(t, strings.HasSuffix(strings.TrimSpace(s), ";"), "%s: a SQL statement must not end with ; (ORA-00911)", c.Name)
		}
		require.NotRegexp(t, `\$\d`, c.Q.SQL, c.Name)
		require.NotContains(t, c.Q.SQL, "?", c.Name)
		require.NotContains(t, s, "RETURNING", c.Name)
		require.NotContains(t, s, "ON CONFLICT", c.Name)
		require.NotContains(t, s, "::", c.Name)
		require.NotContains(t, s, "ANY(", c.Name)
		require.NotContains(t, s, "''", "%s: '' is NULL on Oracle", c.Name)
		require.NotRegexp(t, `\bIF (NOT )?EXISTS\b`, s, c.Name)
		for _, a := range c.Q.Args {
			if tm, ok := a.(time.Time); ok {
				require.Equal(t, time.UTC, tm.Location(), "%s: times bound in UTC", c.Name)
			}
			require.NotEqual(t, "", a, "%s: no '' bound (Oracle stores NULL)", c.Name)
			_, isID := a.(oncebox.EventID)
			require.False(t, isID, "%s: ids bound as 16 bytes, never EventID (its Value is text)", c.Name)
		}
		// SYS_EXTRACT_UTC(SYSTIMESTAMP) is the database's clock, read for
		// the relay's clock check: no time is bound there.
		require.Equal(t, strings.Count(c.Q.SQL, "SYS_EXTRACT_UTC(")-strings.Count(c.Q.SQL, "SYS_EXTRACT_UTC(SYSTIMESTAMP)"), countTimeArgs(c.Q.Args),
			"%s: every time goes through SYS_EXTRACT_UTC, nothing else does", c.Name)
	}
}

func countTimeArgs(args []any) int {
	n := 0
	for _, a := range args {
		if _, ok := a.(time.Time); ok {
			n++
		}
	}
	return n
}

var oracleBindRe = regexp.MustCompile(`:(\d+)`)

// requireOracleBinds checks that the placeholders of q are :1, :2, … :n in
// the order they are written, each once, with n = len(q.Args): Oracle binds
// SQL by position, so a reused placeholder would take a second argument.
func requireOracleBinds(t *testing.T, name string, q dialects.Query) {
	t.Helper()
	ms := oracleBindRe.FindAllStringSubmatch(q.SQL, -1)
	require.Len(t, ms, len(q.Args), "%s: one placeholder per argument", name)
	for i, m := range ms {
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		if n != i+1 {
			require.Failf(t, "placeholders out of order", "%s: placeholder #%d is :%d", name, i+1, n)
		}
	}
}

func TestOracleINListsAreSplitAtOneThousand(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{})
	listRe := regexp.MustCompile(`id IN \(([^)]*)\)`)
	for _, c := range []struct {
		n     int
		lists []int
	}{
		{999, []int{999}},
		{1000, []int{1000}},
		{1001, []int{1000, 1}},
		{2500, []int{1000, 1000, 500}},
	} {
		ids := make([]oncebox.EventID, c.n)
		for i := range ids {
			ids[i] = oncebox.EventID{byte(i), byte(i >> 8), 0x7f}
		}
		for name, q := range map[string]dialects.Query{
			"DLQDeleteMany":       d.DLQDeleteManySQL(ids),
			"EventsRelease":       d.EventsRelease(oncebox.EventID{1}, ids, time.Now()),
			"EventsMarkProcessed": d.EventsMarkProcessed(oncebox.EventID{1}, ids, time.Now()),
		} {
			requireOracleBinds(t, name, q)
			var got []int
			for _, m := range listRe.FindAllStringSubmatch(q.SQL, -1) {
				got = append(got, strings.Count(m[1], ":"))
			}
			require.Equal(t, c.lists, got, "%s of %d ids", name, c.n)
			if len(c.lists) > 1 {
				require.Contains(t, q.SQL, "(id IN (:", "%s: the lists are OR-ed in parentheses", name)
				require.Equal(t, len(c.lists)-1, strings.Count(q.SQL, ") OR id IN ("), name)
			} else {
				require.NotContains(t, q.SQL, " OR ", name)
			}
		}
	}
}

// TestOracleMarkFailedFitsTheLargestBatch: the CASE form takes nine binds a
// row; past 7,281 rows the MERGE form (five a row) takes over, so a batch of
// MaxBatchSize (10,000) fits in 65,535 binds.
func TestOracleMarkFailedFitsTheLargestBatch(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{})
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rows := func(n int) []dialects.FailedEvent {
		out := make([]dialects.FailedEvent, n)
		for i := range out {
			out[i] = dialects.FailedEvent{ID: oncebox.EventID{byte(i), byte(i >> 8), 1}, Status: oncebox.StatusPending,
				RetryCount: 1, NextRetryAt: at, Error: "e"}
		}
		return out
	}
	for _, c := range []struct {
		n      int
		prefix string
	}{{1, "UPDATE "}, {7281, "UPDATE "}, {7282, "MERGE INTO "}, {oncebox.MaxBatchSize, "MERGE INTO "}} {
		q := d.EventsMarkFailed(oncebox.EventID{0xff}, rows(c.n), at)
		require.True(t, strings.HasPrefix(q.SQL, c.prefix), "%d rows: %.30s", c.n, q.SQL)
		require.LessOrEqual(t, len(q.Args), 65535, "%d rows", c.n)
		requireOracleBinds(t, fmt.Sprintf("EventsMarkFailed of %d rows", c.n), q)
	}
}

func formatArgs(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			parts[i] = fmt.Sprintf("0x%X", v)
		case time.Time:
			parts[i] = v.Format(time.RFC3339Nano)
		case nil:
			parts[i] = "NULL"
		case string:
			parts[i] = strconv.Quote(v)
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// The stale bound and the processing bound are each bound where they are
// used, in the order the placeholders appear: a swap would recover live
// instances' claims after the heartbeat timeout.
func TestRecoverStaleBindsEachBoundWhereItIsUsed(t *testing.T) {
	t.Parallel()
	p := heartbeatRecoverParams
	ora := newOracle(t, oncebox.TablesConfig{})
	q := ora.EventsRecoverStale(p)
	requireOracleBinds(t, "EventsRecoverStale", q)
	bounds := []any{p.StaleBefore, p.ClaimedBefore, p.StaleBefore}
	require.Equal(t, append(append(append([]any{p.Now}, bounds...), bounds...), p.Limit), q.Args)
}

// heartbeatRecoverParams are the golden files' recovery bounds: the
// defaults' 300s and 12s before golden.At.
var heartbeatRecoverParams = dialects.RecoverParams{Now: golden.At, ClaimedBefore: golden.At.Add(-300 * time.Second),
	StaleBefore: golden.At.Add(-12 * time.Second), Limit: 1000}

// The relay's read of the next due time (dialects.NextDueReader): one
// probe of the claim index, binding the type and the time.
func TestOracleNextDueGolden(t *testing.T) {
	t.Parallel()
	d := newOracle(t, oncebox.TablesConfig{Schema: "svc", Prefix: "p_"})
	q := d.NextDueSQL("order-created", time.Date(2026, 11, 30, 13, 0, 0, 1_500, time.FixedZone("CET", 3600)))
	golden.Check(t, "oracle_next_due.sql", q.SQL+"\n")
	require.Equal(t, []any{"order-created", time.Date(2026, 11, 30, 12, 0, 0, 1_500, time.UTC)}, q.Args, "the type and the time, as the dialect binds it")
}
