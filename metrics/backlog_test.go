package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/metrics"
)

// backlogStatements counts the backlog queries among the recorded ones.
func backlogStatements(tr *pgtest.StatementCounter) int {
	n := 0
	for _, q := range tr.Statements() {
		if strings.Contains(q, "GROUP BY event_type, status") {
			n++
		}
	}
	return n
}

func exec(t *testing.T, s *pgtest.Schema, q dialects.Query) {
	t.Helper()
	_, err := s.Pool.Exec(context.Background(), q.SQL, q.Args...)
	require.NoError(t, err)
}

// moveToDLQ runs the dialect's move of FAILED rows to the DLQ.
func moveToDLQ(t *testing.T, s *pgtest.Schema, now time.Time, limit int) {
	t.Helper()
	_, err := s.Dialect.MoveToDLQ(context.Background(), s.Beginner, now, limit)
	require.NoError(t, err)
}

func TestBacklogValues(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(t0)
	events := s.Dialect.Tables().Events
	ctx := context.Background()

	oldest := publish(t, s, clock, "order-created", 1)
	clock.Advance(time.Minute)
	publish(t, s, clock, "order-created", 4)
	publish(t, s, clock, "order-paid", 2)
	// The DLQ: one publisher row (a FAILED order-paid moved), two consumer rows.
	_, err := s.Pool.Exec(ctx, "UPDATE "+events+" SET status = 'FAILED' WHERE id IN (SELECT id FROM "+events+
		" WHERE event_type = 'order-paid' LIMIT 1)")
	require.NoError(t, err)
	moveToDLQ(t, s, clock.Now(), 10)
	// order-created: 2 PENDING (oldest at t0), 1 PROCESSED, 1 IN_PROCESS, 1 FAILED.
	for status, n := range map[string]int{"PROCESSED": 1, "IN_PROCESS": 1, "FAILED": 1} {
		_, err = s.Pool.Exec(ctx, "UPDATE "+events+" SET status = $1 WHERE id IN (SELECT id FROM "+events+
			" WHERE event_type = 'order-created' AND status = 'PENDING' AND id <> $2 ORDER BY id LIMIT $3)", status, oldest[0], n)
		require.NoError(t, err)
	}
	for i := range 2 {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		require.NoError(t, s.Dialect.PoisonUpsert(ctx, s.Beginner, dialects.DLQRow{ID: id, HandlerName: "h", EventType: "order-created",
			Topic: "order-created", MessageUUID: string(rune('a' + i)), Payload: []byte("{}"), Metadata: "{}",
			Error: "boom", FailedAt: clock.Now()}))
	}
	exec(t, s, dialects.Query{SQL: "UPDATE " + s.Dialect.Tables().DLQ + " SET status = 'RESOLVED' WHERE message_uuid = 'a'"})

	clock.Advance(90 * time.Second) // now = t0 + 2m30s
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.NewBacklogCollector(s.Beginner, s.Dialect, metrics.BacklogConfig{Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(c))

	ev := func(et, st string) map[string]string { return map[string]string{"event_type": et, "status": st} }
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-created", "PENDING")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-created", "PROCESSED")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-created", "IN_PROCESS")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-created", "FAILED")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-paid", "PENDING")))
	_, ok := value(t, reg, "oncebox_outbox_events", ev("order-paid", "FAILED"))
	require.False(t, ok, "moved to the DLQ")
	require.Equal(t, 150.0, mustValue(t, reg, "oncebox_outbox_oldest_pending_age_seconds", map[string]string{"event_type": "order-created"}))
	require.Equal(t, 90.0, mustValue(t, reg, "oncebox_outbox_oldest_pending_age_seconds", map[string]string{"event_type": "order-paid"}))
	dl := func(st, src string) map[string]string { return map[string]string{"status": st, "source": src} }
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_dlq_events", dl("MOVED", "publisher")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_dlq_events", dl("MOVED", "consumer")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_dlq_events", dl("RESOLVED", "consumer")))
	require.Equal(t, 0.0, mustValue(t, reg, "oncebox_backlog_refresh_errors_total", nil))
	require.Equal(t, float64(clock.Now().Unix()), mustValue(t, reg, "oncebox_backlog_last_refresh_success_timestamp_seconds", nil))

	// Within the TTL the values are cached, the age still moves with the clock.
	publish(t, s, clock, "order-paid", 3)
	clock.Advance(10 * time.Second)
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-paid", "PENDING")))
	require.Equal(t, 100.0, mustValue(t, reg, "oncebox_outbox_oldest_pending_age_seconds", map[string]string{"event_type": "order-paid"}))
	clock.Advance(metrics.DefaultBacklogTTL)
	require.Equal(t, 4.0, mustValue(t, reg, "oncebox_outbox_events", ev("order-paid", "PENDING")))
}

func TestBacklogScrapeStormRunsOneQueryPerTTL(t *testing.T) {
	t.Parallel()
	tr := &pgtest.StatementCounter{}
	s := pgtest.NewSchema(t, pgtest.WithTracer(tr))
	clock := clockwork.NewFakeClockAt(t0)
	publish(t, s, clock, "order-created", 3)
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.NewBacklogCollector(s.Beginner, s.Dialect, metrics.BacklogConfig{TTL: 15 * time.Second, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(c))
	tr.Reset()

	storm := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				for range 20 {
					mfs, err := reg.Gather()
					if err != nil || len(mfs) < 2 {
						t.Errorf("gather: %d families, %v", len(mfs), err)
					}
				}
			})
		}
		wg.Wait()
	}
	storm()
	require.Equal(t, 1, backlogStatements(tr), "1,000 scrapes within one TTL: one query")
	clock.Advance(14 * time.Second)
	storm()
	require.Equal(t, 1, backlogStatements(tr))
	clock.Advance(time.Second)
	storm()
	require.Equal(t, 2, backlogStatements(tr), "the TTL passed: one more query")
	require.Equal(t, 3.0, mustValue(t, reg, "oncebox_outbox_events", map[string]string{"event_type": "order-created", "status": "PENDING"}))
}

// flaky is a ContextExecutor whose queries fail while down is set.
type flaky struct {
	wsql.ContextExecutor
	down    atomic.Bool
	queries atomic.Int32
}

func (f *flaky) QueryContext(ctx context.Context, q string, args ...any) (wsql.Rows, error) {
	f.queries.Add(1)
	if f.down.Load() {
		return nil, errors.New("connection refused")
	}
	return f.ContextExecutor.QueryContext(ctx, q, args...)
}

func TestBacklogFailedRefreshKeepsTheLastValues(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(t0)
	publish(t, s, clock, "order-created", 2)
	db := &flaky{ContextExecutor: s.Beginner}
	db.down.Store(true)
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.NewBacklogCollector(db, s.Dialect, metrics.BacklogConfig{TTL: time.Minute, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(c))
	pending := map[string]string{"event_type": "order-created", "status": "PENDING"}

	// Down from the start: no values yet, one error, and no retry within the TTL.
	_, ok := value(t, reg, "oncebox_outbox_events", pending)
	require.False(t, ok)
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_backlog_refresh_errors_total", nil))
	require.Equal(t, int32(1), db.queries.Load())

	db.down.Store(false)
	clock.Advance(time.Minute)
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_outbox_events", pending))

	db.down.Store(true)
	publish(t, s, clock, "order-created", 1)
	clock.Advance(time.Minute)
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_outbox_events", pending), "the last values are kept")
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_backlog_refresh_errors_total", nil))
	require.Equal(t, float64(t0.Add(time.Minute).Unix()), mustValue(t, reg, "oncebox_backlog_last_refresh_success_timestamp_seconds", nil))
}

func TestBacklogConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := metrics.NewBacklogCollector(nil, nil, metrics.BacklogConfig{TTL: -1})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
}
