package dialects_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// The Oracle dialect on a real server. Every test here is skipped with
// dbtest.OracleNotRun unless ORACLE_DSN is set (go-ora's URL form,
// oracle://user:pass@host:1521/service; add ?PREFETCH_ROWS=n to bound the
// rows a claim cursor locks). They have never run in this repository's
// environment, which has no Oracle server.

func oracleEnv(t *testing.T) (*dbtest.Env, *dialects.Oracle) {
	t.Helper()
	for _, tg := range dbtest.Targets() {
		if tg.Name == "oracle" {
			e := tg.New(t)
			d, ok := e.Dialect.(*dialects.Oracle)
			require.True(t, ok)
			return e, d
		}
	}
	t.Fatal("dbtest has no oracle target")
	return nil, nil
}

func liveNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newID(t *testing.T) oncebox.EventID {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	return id
}

// insertEvents writes n PENDING events of type typ due at at.
func insertEvents(t *testing.T, e *dbtest.Env, d *dialects.Oracle, typ string, n int, at time.Time) []oncebox.EventID {
	t.Helper()
	var ids []oncebox.EventID
	var rows []dialects.EventRow
	for i := 0; i < n; i++ {
		id := newID(t)
		ids = append(ids, id)
		rows = append(rows, dialects.EventRow{ID: id, EventType: typ, Topic: "orders", MessageUUID: id.String(),
			Payload: []byte("payload"), Metadata: `{"k":"v"}`, CreatedAt: at})
	}
	for len(rows) > 0 {
		k := min(len(rows), 50)
		require.EqualValues(t, k, e.Exec(t, d.EventsInsert(rows[:k])))
		rows = rows[k:]
	}
	return ids
}

func TestOracleLiveMigrateTwice(t *testing.T) {
	e, d := oracleEnv(t)
	ctx := context.Background()
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, d), "a second Migrate finds version 1 applied")
	ms, err := d.Migrations()
	require.NoError(t, err)
	for i, s := range ms[0].Statements {
		_, err := e.DB.ExecContext(ctx, s)
		require.NoError(t, err, "statement %d runs again over existing objects (ORA-00955 ignored)", i)
	}
	require.Equal(t, 1, e.Count(t, e.Tables.Migrations, ""))
}

func TestOracleLiveConcurrentClaimsAreDisjoint(t *testing.T) {
	e, d := oracleEnv(t)
	ctx := context.Background()
	now := liveNow()
	ids := insertEvents(t, e, d, "order-created", 200, now.Add(-time.Second))

	var mu sync.Mutex
	seen := map[oncebox.EventID]int{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				tok, err := oncebox.NewEventID() // no require off the test goroutine
				if !assertNoError(t, err) {
					return
				}
				got, err := d.Claim(ctx, e.Beginner, dialects.ClaimParams{EventType: "order-created", Limit: 30,
					Token: tok, Now: liveNow()})
				if !assertNoError(t, err) || len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, seen, len(ids), "every row claimed")
	for id, n := range seen {
		require.Equal(t, 1, n, "%s claimed once", id)
	}
	require.Equal(t, 200, e.Count(t, e.Tables.Events, "status = 'IN_PROCESS'"))
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func TestOracleLiveRoundTrip(t *testing.T) {
	e, d := oracleEnv(t)
	ctx := context.Background()
	now := liveNow()
	ids := insertEvents(t, e, d, "order-created", 4, now.Add(-time.Second))
	tok := newID(t)
	claimed, err := d.Claim(ctx, e.Beginner, dialects.ClaimParams{EventType: "order-created", Limit: 10, Token: tok, Now: now})
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	require.Equal(t, []byte("payload"), claimed[0].Payload)
	require.JSONEq(t, `{"k":"v"}`, string(claimed[0].Metadata))
	require.Equal(t, now.Add(-time.Second), claimed[0].NextRetryAt.UTC(), "UTC in, UTC out, to the microsecond")

	marked, err := d.MarkProcessed(ctx, e.Beginner, tok, ids[:1], now)
	require.NoError(t, err)
	require.Equal(t, ids[:1], marked)
	marked, err = d.MarkProcessed(ctx, e.Beginner, newID(t), ids[1:2], now)
	require.NoError(t, err)
	require.Empty(t, marked, "another token marks nothing")

	n, err := d.Exec(ctx, e.Beginner, d.EventsMarkFailed(tok, []dialects.FailedEvent{
		{ID: ids[1], Status: oncebox.StatusFailed, RetryCount: 5, NextRetryAt: now, Error: "boom"},
		{ID: ids[2], Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: now.Add(time.Hour), Error: "bang"},
	}, now))
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = d.Exec(ctx, e.Beginner, d.EventsRelease(tok, ids[3:4], now))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, 1, e.Count(t, e.Tables.Events, "status = 'FAILED' AND retry_count = 5 AND first_failed_at IS NOT NULL"))

	// ids[3] is due again: claim it and let it be recovered.
	again, err := d.Claim(ctx, e.Beginner, dialects.ClaimParams{EventType: "order-created", Limit: 10, Token: newID(t), Now: now})
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, ids[3], again[0].ID)
	n, err = d.Exec(ctx, e.Beginner, d.EventsRecover(now.Add(time.Minute), now, 100))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	moved, err := d.MoveToDLQ(ctx, e.Beginner, now, 100)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.Equal(t, 0, e.Count(t, e.Tables.Events, "status = 'FAILED'"))

	var rec dialects.DLQRecord
	q := d.DLQGet(ids[1])
	require.NoError(t, e.DB.QueryRowContext(ctx, q.SQL, q.Args...).Scan(rec.ScanTargets()...))
	require.Equal(t, "publisher", rec.Source)
	require.Equal(t, " ", rec.HandlerName, "'' is stored as ' ' on Oracle")
	require.Equal(t, "MOVED", rec.Status)
	require.Equal(t, 5, rec.RetryCount)

	n, err = d.Exec(ctx, e.Beginner, d.DLQSetStatus(ids[1], oncebox.DLQStatusToRetry, []oncebox.DLQStatus{oncebox.DLQStatusMoved}, now))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	transferred, err := d.TransferDLQToOutbox(ctx, e.Beginner, now, 100)
	require.NoError(t, err)
	require.Equal(t, 1, transferred)
	require.Equal(t, 0, e.Count(t, e.Tables.DLQ, ""))
	require.Equal(t, 1, e.Count(t, e.Tables.Events, "id = "+e.P(1)+" AND status = 'PENDING' AND retry_count = 0 AND JSON_VALUE(metadata, '$.oncebox_event_id') = "+e.P(2),
		e.ID(ids[1]), ids[1].String()))

	n, err = d.Exec(ctx, e.Beginner, d.EventsDeleteProcessed(now.Add(time.Minute), 100))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	var bl int
	rows, err := e.DB.QueryContext(ctx, d.Backlog().SQL)
	require.NoError(t, err)
	for rows.Next() {
		bl++
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Positive(t, bl)
}

func TestOracleLiveLease(t *testing.T) {
	e, d := oracleEnv(t)
	ctx := context.Background()
	now := liveNow()
	a := dialects.Lease{Name: "outbox-clean-up", Owner: "a", LockedAt: now, Until: now.Add(time.Minute)}
	ok, err := d.AcquireLease(ctx, e.Beginner, a)
	require.NoError(t, err)
	require.True(t, ok)
	b := dialects.Lease{Name: "outbox-clean-up", Owner: "b", LockedAt: now.Add(time.Second), Until: now.Add(time.Minute)}
	ok, err = d.AcquireLease(ctx, e.Beginner, b)
	require.NoError(t, err)
	require.False(t, ok, "a live lease is not taken")
	a.Until = now
	require.EqualValues(t, 1, e.Exec(t, d.LeaseRelease(a)), "released by its owner, matched to the microsecond")
	ok, err = d.AcquireLease(ctx, e.Beginner, b)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestOracleLiveInbox(t *testing.T) {
	e, d := oracleEnv(t)
	ctx := context.Background()
	now := liveNow()
	require.EqualValues(t, 1, e.Exec(t, d.InboxInsert("", "e-1", now)))
	require.EqualValues(t, 0, e.Exec(t, d.InboxInsert("", "e-1", now)), "present")
	require.EqualValues(t, 1, e.Exec(t, d.InboxInsert("billing", "e-1", now)), "another namespace")

	tx, err := e.Beginner.BeginTx(ctx, nil)
	require.NoError(t, err)
	got, err := d.InboxRecordMany(ctx, tx, "", []string{"e-1", "e-2", "e-3"}, now)
	require.NoError(t, err)
	require.Equal(t, []string{"e-2", "e-3"}, got)
	require.NoError(t, tx.Commit())
	require.Equal(t, 4, e.Count(t, e.Tables.Inbox, ""))

	n, err := d.Exec(ctx, e.Beginner, d.InboxDeleteBefore(now.Add(time.Second), 3))
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
}

func TestOracleLiveDLQConsumer(t *testing.T) {
	e, d := oracleEnv(t)
	ctx := context.Background()
	now := liveNow()
	ev := newID(t)
	row := dialects.DLQRow{ID: newID(t), EventID: &ev, HandlerName: "h", EventType: "order-created", Topic: "orders",
		MessageUUID: "m1", Payload: []byte("p"), Metadata: "{}", Error: "boom", FailedAt: now}
	require.EqualValues(t, 1, e.Exec(t, d.DLQUpsertConsumer(row)))
	row.ID = newID(t)
	require.EqualValues(t, 1, e.Exec(t, d.DLQUpsertConsumer(row)), "matched: one more attempt")
	require.Equal(t, 1, e.Count(t, e.Tables.DLQ, "retry_count = 2"))

	// Without an event id: unique by message, side and handler; two such
	// rows of different messages do not collide.
	for _, m := range []string{"m2", "m2", "m3"} {
		require.EqualValues(t, 1, e.Exec(t, d.DLQUpsertConsumer(dialects.DLQRow{ID: newID(t), HandlerName: "h",
			EventType: "order-created", Topic: "orders", MessageUUID: m, Metadata: "{}", Error: "x", FailedAt: now})))
	}
	require.Equal(t, 3, e.Count(t, e.Tables.DLQ, ""))

	page := d.DLQList(dialects.DLQFilter{Source: oncebox.DLQSourceConsumer}, nil, 2)
	rows, err := e.DB.QueryContext(ctx, page.SQL, page.Args...)
	require.NoError(t, err)
	var last dialects.DLQRecord
	count := 0
	for rows.Next() {
		require.NoError(t, rows.Scan(last.ScanTargets()...))
		count++
	}
	require.NoError(t, rows.Close())
	require.Equal(t, 2, count)
	next := d.DLQList(dialects.DLQFilter{}, &dialects.DLQKey{MovedAt: last.MovedAt, ID: last.ID}, 10)
	rows, err = e.DB.QueryContext(ctx, next.SQL, next.Args...)
	require.NoError(t, err)
	count = 0
	for rows.Next() {
		count++
	}
	require.NoError(t, rows.Close())
	require.Equal(t, 1, count, "the keyset page continues after the last row")
}
