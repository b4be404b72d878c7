package poller_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/inprocess"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// parkOne stores one consumer row (MOVED) in the DLQ through d and returns
// its id.
func parkOne(t *testing.T, d dialects.Dialect, db wsql.ContextExecutor, clock clockwork.Clock) oncebox.EventID {
	t.Helper()
	eventID, err := oncebox.NewEventID()
	require.NoError(t, err)
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, d.PoisonUpsert(context.Background(), db, dialects.DLQRow{ID: id, EventID: &eventID,
		HandlerName: "ship", EventType: "order-created", Topic: "orders", MessageUUID: "m-1",
		Payload: []byte(`{"n":1}`), Metadata: `{}`, Error: "boom", FailedAt: clock.Now().UTC()}))
	return id
}

// dlqRetryRuns returns the runs of the dlq-retry job and the rows they moved.
func dlqRetryRuns(h *wakeHooks) (runs, rows int, last time.Duration) {
	for _, j := range h.Snapshot().Jobs {
		if j.Job == poller.JobDLQRetry {
			runs++
			rows += j.Rows
			last = j.NextDelay
		}
	}
	return runs, rows, last
}

// On PostgreSQL a retry through dlq.Store notifies in its transaction and
// the relay's dlq-retry job runs at once: the fake clock never moves past
// the job's first run, whose delay has grown meanwhile. Before, the store
// only marked the rows and the job waited its delay (10s to 1h).
func TestDLQRetryOnPostgreSQLWakesTheJobAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	cfg := b.config("order-created")
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	cfg.Hooks = h
	rec := newRecorder()
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "listener up", func() bool { ups, _, _ := h.state(); return ups == 1 })
	// Let the job's pace grow: three idle runs (10s, 20s, 40s); its next
	// run is 80s away.
	for i := 1; i <= 3; i++ {
		eventually(t, "idle runs", func() bool {
			b.clock.Advance(time.Second)
			runs, _, _ := dlqRetryRuns(h)
			return runs >= i
		})
	}
	_, _, next := dlqRetryRuns(h)
	require.Greater(t, next, 10*time.Second, "the idle job's delay grew")

	id := parkOne(t, b.schema.Dialect, b.schema.Beginner, b.clock)
	st, err := dlq.NewStore(b.schema.Beginner, dlq.Config{Dialect: b.schema.Dialect, Clock: b.clock})
	require.NoError(t, err)
	require.True(t, st.RetryPickup().Woken)
	require.NoError(t, st.SetStatus(context.Background(), id, oncebox.DLQStatusToRetry))
	eventually(t, "the woken job moved the row", func() bool { _, rows, _ := dlqRetryRuns(h); return rows == 1 })
	_, _, woken := h.state()
	require.Contains(t, woken, woke("", poller.WokeDLQRetry))
	_, err = st.Get(context.Background(), id)
	require.ErrorIs(t, err, dlq.ErrNotFound, "back in the outbox")
	// The job woke the type's loop (its delay had grown too): the event is
	// sent without the clock moving.
	eventually(t, "the retried event is sent", func() bool { return len(rec.deliveries()) == 1 })
}

// On MariaDB through a *sql.DB opened with package inprocess, a retry in
// the relay's process wakes the job at once (the fake clock never moves);
// and a relay that cannot hear other processes' retries keeps the job's
// pace at most dlq.UnwokenPickupBound (10s) instead of letting it grow to
// an hour.
func TestDLQRetryInProcessWakesTheJobAndItsPaceStaysWithinTenSeconds(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "mysql").New(t)
	db, err := inprocess.OpenDB("mysql", dbtest.MySQLDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	clock := clockwork.NewFakeClockAt(t0)
	h := &wakeHooks{}
	cfg := poller.Config{Dialect: env.Dialect, Clock: clock, Hooks: h}
	cfg.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{"order-created": {}}
	cfg.Oncebox.Outbox.StrictEventTypes = true
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	beginner := wsql.BeginnerFromStdSQL(db)
	p, err := poller.New(beginner, newRecorder(), cfg, nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "listener up", func() bool { ups, _, _ := h.state(); return ups == 1 })

	// An idle hour: the job's delay never exceeds 10s.
	stepUntil(t, clock, 6, 5*time.Second, time.Hour+time.Minute, func() bool { return clock.Since(t0) >= time.Hour })
	runs, _, _ := dlqRetryRuns(h)
	require.GreaterOrEqual(t, runs, 300, "the job ran at least every 10s over the hour")
	for _, j := range h.Snapshot().Jobs {
		if j.Job == poller.JobDLQRetry {
			require.LessOrEqual(t, j.NextDelay, dlq.UnwokenPickupBound)
		}
	}

	// A retry through a Store on the same *sql.DB: woken at once.
	id := parkOne(t, env.Dialect, beginner, clock)
	st, err := dlq.NewStore(beginner, dlq.Config{Dialect: env.Dialect, Clock: clock})
	require.NoError(t, err)
	require.True(t, st.RetryPickup().Woken, "a relay listens in this process")
	n, err := st.SetStatusMany(context.Background(), []oncebox.EventID{id}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	eventually(t, "the woken job moved the row", func() bool { _, rows, _ := dlqRetryRuns(h); return rows == 1 })

	// A Store over a plain *sql.DB (another process, as the CLI) cannot
	// wake it: it says within 10s.
	plain, err := sql.Open("mysql", dbtest.MySQLDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	other, err := dlq.NewStore(wsql.BeginnerFromStdSQL(plain), dlq.Config{Dialect: env.Dialect})
	require.NoError(t, err)
	require.Equal(t, dlq.Pickup{Within: 10 * time.Second}, other.RetryPickup())
}
