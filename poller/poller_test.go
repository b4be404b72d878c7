package poller_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

func TestFourPollersDeliverEveryEventOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const total = 20_000
	ids := b.publish(t, nil, "order-created", total)
	rec := newRecorder()
	for i := range 4 {
		cfg := fastPolling(b.config("order-created"))
		cfg.InstanceID = fmt.Sprintf("instance-%d", i)
		p, err := poller.New(b.schema.Beginner, rec, watermill.NopLogger{}, cfg)
		require.NoError(t, err)
		start(t, p)
	}
	eventually(t, "every event delivered", func() bool { return rec.delivered() == total })
	eventually(t, "every row PROCESSED", func() bool { return b.status(t, "PROCESSED") == total })
	got := rec.deliveries()
	for _, id := range ids {
		require.Equal(t, 1, got[id], "event %s delivered once: no double claim", id)
	}
}

func TestCrashedPollerIsRecoveredWithoutAttemptAndItsLateFinalizeChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.publish(t, b.clock, "order-created", 5)

	// Instance A claims the batch and hangs in the send, as if it had died.
	claimed := make(chan struct{})
	unblock := make(chan struct{})
	hung := newRecorder()
	hung.fn = func(string, []*message.Message) error {
		close(claimed)
		<-unblock
		return errors.New("the broker rejected the message") // the late outcome of a dead instance
	}
	hA := &hooks{}
	cfgA := b.config("order-created")
	cfgA.InstanceID, cfgA.Hooks = "A", hA
	a, err := poller.New(b.schema.Beginner, hung, nil, cfgA)
	require.NoError(t, err)
	start(t, a)
	<-claimed
	require.Equal(t, 5, b.status(t, "IN_PROCESS"))

	// Instance B recovers the rows after max-batch-processing-time (300s)
	// and delivers them.
	rec := newRecorder()
	hB := &hooks{}
	cfgB := b.config("order-created")
	cfgB.InstanceID, cfgB.Hooks = "B", hB
	bp, err := poller.New(b.schema.Beginner, rec, nil, cfgB)
	require.NoError(t, err)
	start(t, bp)
	// Waiting on the clock: A's recovery and clean-up (its poll loop hangs),
	// B's poll loop, recovery and clean-up.
	spent := stepUntil(t, b.clock, 5, time.Second, 20*time.Minute, func() bool { return rec.delivered() == 5 })
	require.GreaterOrEqual(t, spent, 300*time.Second, "not recovered before max-batch-processing-time")
	eventually(t, "B marks the rows PROCESSED", func() bool { return b.status(t, "PROCESSED") == 5 })
	recovered := 0
	for _, j := range hB.snapshot().jobs {
		if j.Job == poller.JobRecovery {
			recovered += j.Rows
		}
	}
	for _, j := range hA.snapshot().jobs {
		if j.Job == poller.JobRecovery {
			recovered += j.Rows
		}
	}
	require.Equal(t, 5, recovered)

	// A wakes up and reports a failure for its stale claim: nothing changes.
	close(unblock)
	eventually(t, "A's finalize is seen as stale", func() bool { return len(hA.snapshot().stale) == 1 })
	require.Equal(t, [2]int{5, 0}, hA.snapshot().stale[0])
	require.Equal(t, 5, b.status(t, "PROCESSED"))
	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().Events, "retry_count <> 0"), "recovery counts no attempt")
	for _, id := range ids {
		require.Equal(t, 1, rec.deliveries()[id])
	}
}

func TestRetryScheduleThenFailedThenDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.publish(t, b.clock, "order-created", 1)

	var mu sync.Mutex
	var attempts []time.Time
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		mu.Lock()
		attempts = append(attempts, b.clock.Now())
		mu.Unlock()
		return errors.New("schema registry says no")
	}
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)

	dlq := b.schema.Dialect.Tables().DLQ
	// Waiting on the clock: poll loop, recovery, clean-up, DLQ transfer, DLQ
	// retry, DLQ clean-up.
	stepUntil(t, b.clock, 6, 250*time.Millisecond, 10*time.Minute, func() bool { return b.schema.Count(t, dlq, "") == 1 })

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, 4, "max-retries 3 means 4 attempts")
	failures := h.snapshot().failures
	require.Len(t, failures, 4)
	for k, want := range []time.Duration{10 * time.Second, 30 * time.Second, 90 * time.Second} {
		f := failures[k]
		require.Equal(t, k+1, f.Attempt)
		require.False(t, f.Final)
		require.Equal(t, want, f.NextRetryAt.Sub(attempts[k]), "retry %d waits exactly %s", k+1, want)
		require.False(t, attempts[k+1].Before(f.NextRetryAt), "attempt %d not before its retry time", k+2)
	}
	require.True(t, failures[3].Final)

	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().Events, ""), "gone from the outbox")
	var eventID, source, status, lastErr string
	var retries int
	require.NoError(t, b.schema.Pool.QueryRow(context.Background(),
		"SELECT event_id::text, source, status, retry_count, last_error FROM "+dlq).Scan(&eventID, &source, &status, &retries, &lastErr))
	require.Equal(t, ids[0], eventID)
	require.Equal(t, "publisher", source)
	require.Equal(t, "MOVED", status)
	require.Equal(t, 4, retries)
	require.Equal(t, "schema registry says no", lastErr)
}

func TestBrokerOutageBurnsNoAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		if down.Load() {
			return fmt.Errorf("dial tcp 127.0.0.1:9092: %w", oncebox.ErrBrokerUnavailable)
		}
		return nil
	}
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)

	// A long outage: ten minutes, far more polls than max-retries.
	stepUntil(t, b.clock, 3, 250*time.Millisecond, 10*time.Minute, func() bool { return h.snapshot().unavailable >= 8 })
	require.Equal(t, 3, b.status(t, "PENDING"))
	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().Events, "retry_count <> 0"))
	require.Empty(t, h.snapshot().failures)
	// The type backs off while the broker is down.
	polls := h.snapshot().polls
	require.Greater(t, polls[len(polls)-1].NextDelay, polls[0].NextDelay)

	down.Store(false)
	stepUntil(t, b.clock, 3, time.Second, 5*time.Minute, func() bool { return rec.delivered() == 3 })
	eventually(t, "PROCESSED", func() bool { return b.status(t, "PROCESSED") == 3 })
	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().Events, "retry_count <> 0"))
}

// batchRecorder implements poller.BatchPublisher: it rejects messages whose
// payload is "poison".
type batchRecorder struct{ *recorder }

func (b batchRecorder) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	var ok []*message.Message
	for i, m := range msgs {
		if string(m.Payload) == "poison" {
			errs[i] = errors.New("record too large")
			continue
		}
		ok = append(ok, m)
	}
	return errs, b.recorder.Publish(topic, ok...)
}

func TestBatchPublisherFailsOnlyTheRejectedMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 4)
	_, err := b.schema.Pool.Exec(context.Background(), "UPDATE "+b.schema.Dialect.Tables().Events+
		" SET payload = 'poison' WHERE id = (SELECT id FROM "+b.schema.Dialect.Tables().Events+" ORDER BY id LIMIT 1)")
	require.NoError(t, err)
	rec := batchRecorder{newRecorder()}
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)
	require.NoError(t, b.clock.BlockUntilContext(context.Background(), 3))
	eventually(t, "the three good ones PROCESSED", func() bool { return b.status(t, "PROCESSED") == 3 })
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().Events,
		"status = 'PENDING' AND retry_count = 1 AND payload = 'poison' AND last_error = 'record too large'"))
	require.Len(t, h.snapshot().failures, 1)
}

func TestPublisherPanicIsAFailedSendNotACrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 2)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error { panic("nil map in the producer") }
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "counted as a failed attempt", func() bool { return len(h.snapshot().failures) == 2 })
	require.ErrorContains(t, h.snapshot().failures[0].Err, "publisher panicked: nil map in the producer")
	require.Equal(t, 2, b.schema.Count(t, b.schema.Dialect.Tables().Events, "status = 'PENDING' AND retry_count = 1"))
}

func TestSlowTypeNeverBlocksAnother(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, nil, "slow", 10)
	fastIDs := b.publish(t, nil, "fast", 500)
	release := make(chan struct{})
	rec := newRecorder()
	rec.fn = func(topic string, _ []*message.Message) error {
		if topic == "slow" {
			<-release
		}
		return nil
	}
	cfg := fastPolling(b.config("slow", "fast"))
	cfg.Oncebox.Outbox.Defaults.BatchSize = 50
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "every fast event delivered while slow hangs", func() bool {
		got := rec.deliveries()
		for _, id := range fastIDs {
			if got[id] != 1 {
				return false
			}
		}
		return true
	})
	require.Equal(t, 10, b.schema.Count(t, b.schema.Dialect.Tables().Events, "event_type = 'slow' AND status = 'IN_PROCESS'"))
	close(release)
	eventually(t, "slow delivered after all", func() bool { return b.status(t, "PROCESSED") == 510 })
}

func TestCloseFinishesTheBatchInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	inFlight := make(chan struct{})
	release := make(chan struct{})
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		close(inFlight)
		<-release
		return nil
	}
	cfg := b.config("order-created")
	cfg.CloseTimeout = time.Minute
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-inFlight

	closed := make(chan struct{})
	go func() { require.NoError(t, p.Close()); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	require.NoError(t, <-errc)
	require.Equal(t, 3, b.status(t, "PROCESSED"))
}

func TestCloseTimeoutReleasesTheBatchWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	inFlight := make(chan struct{})
	rec := newRecorder()
	rec.fn = func(_ string, msgs []*message.Message) error {
		close(inFlight)
		<-msgs[0].Context().Done() // a publisher that honours the context
		return msgs[0].Context().Err()
	}
	cfg := b.config("order-created")
	cfg.CloseTimeout = 50 * time.Millisecond
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-inFlight
	require.NoError(t, p.Close())
	require.NoError(t, <-errc)
	require.Equal(t, 3, b.schema.Count(t, b.schema.Dialect.Tables().Events,
		"status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL"))
}

func TestCleanUpRunsOnOneInstanceUnderTheLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 30)
	events := b.schema.Dialect.Tables().Events
	ctx := context.Background()
	// 20 rows processed 25 hours ago, 10 an hour ago.
	_, err := b.schema.Pool.Exec(ctx, "UPDATE "+events+" SET status = 'PROCESSED', updated_at = $1", t0.Add(-time.Hour))
	require.NoError(t, err)
	_, err = b.schema.Pool.Exec(ctx, "UPDATE "+events+" SET updated_at = $1 WHERE id IN (SELECT id FROM "+events+" ORDER BY id LIMIT 20)", t0.Add(-25*time.Hour))
	require.NoError(t, err)

	var hs []*hooks
	for _, name := range []string{"A", "B"} {
		h := &hooks{}
		hs = append(hs, h)
		cfg := b.config("order-created")
		cfg.InstanceID, cfg.Hooks = name, h
		cfg.Oncebox.Outbox.CleanUp.BatchSize = 7 // several delete statements
		p, err := poller.New(b.schema.Beginner, newRecorder(), nil, cfg)
		require.NoError(t, err)
		start(t, p)
	}
	cleanUps := func() (ran, skipped, rows int) {
		for _, h := range hs {
			for _, j := range h.snapshot().jobs {
				if j.Job != poller.JobOutboxCleanUp {
					continue
				}
				require.NoError(t, j.Err)
				if j.Skipped {
					skipped++
				} else {
					ran++
					rows += j.Rows
				}
			}
		}
		return
	}
	stepUntil(t, b.clock, 6, time.Second, 5*time.Minute, func() bool { ran, skipped, _ := cleanUps(); return ran+skipped >= 2 })
	ran, skipped, rows := cleanUps()
	require.Equal(t, 1, ran, "one instance ran the clean-up")
	require.Equal(t, 1, skipped, "the other found the lease taken")
	require.Equal(t, 20, rows)
	require.Equal(t, 10, b.schema.Count(t, events, ""), "rows younger than the ttl stay")
}

func TestNewValidatesItsArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	ctx := context.Background()
	tx, err := b.schema.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	cases := map[string]struct {
		db   wsql.Beginner
		pub  message.Publisher
		cfg  poller.Config
		want string
	}{
		"nil db":          {nil, rec, b.config("a"), "db is nil"},
		"transaction":     {txAsBeginner{wsql.TxFromPgx(tx)}, rec, b.config("a"), "db is a transaction"},
		"nil publisher":   {b.schema.Beginner, nil, b.config("a"), "publisherOut is nil"},
		"no dialect":      {b.schema.Beginner, rec, poller.Config{EventTypes: []string{"a"}}, "Config.Dialect is nil"},
		"no event types":  {b.schema.Beginner, rec, b.config(), "no event types"},
		"duplicate types": {b.schema.Beginner, rec, b.config("a", "a"), `event type "a" listed twice`},
		"bad schedule": {b.schema.Beginner, rec, func() poller.Config {
			c := b.config("a")
			c.CleanUp = poller.Schedule{Min: time.Hour, Max: time.Minute}
			return c
		}(), "CleanUp"},
		"bad oncebox config": {b.schema.Beginner, rec, func() poller.Config {
			c := b.config("a")
			c.Oncebox.Outbox.Defaults.BatchSize = -3
			return c
		}(), "outbox.defaults.batch-size"},
	}
	for name, c := range cases {
		_, err := poller.New(c.db, c.pub, nil, c.cfg)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
		require.ErrorContains(t, err, c.want, name)
	}
}

type txAsBeginner struct{ wsql.Tx }

func (txAsBeginner) BeginTx(context.Context, *sql.TxOptions) (wsql.Tx, error) { return nil, nil }

// The poller works the same over database/sql (pgx's stdlib driver): the
// claim, the PROCESSED and the failed finalizes.
func TestPollerOverDatabaseSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	events := b.schema.Dialect.Tables().Events
	_, err := b.schema.Pool.Exec(context.Background(), "UPDATE "+events+
		" SET payload = 'poison' WHERE id = (SELECT id FROM "+events+" ORDER BY id LIMIT 1)")
	require.NoError(t, err)
	rec := batchRecorder{newRecorder()}
	p, err := poller.New(wsql.BeginnerFromStdSQL(b.schema.StdDB(t)), rec, nil, b.config("order-created"))
	require.NoError(t, err)
	start(t, p)
	eventually(t, "two PROCESSED, one retried", func() bool {
		return b.status(t, "PROCESSED") == 2 && b.schema.Count(t, events, "status = 'PENDING' AND retry_count = 1") == 1
	})
	got := rec.deliveries()
	require.Len(t, got, 2)
}

// faultyDB is the real database with one injected fault: the first
// statements whose SQL contains match fail, as if the connection dropped.
type faultyDB struct {
	wsql.Beginner
	match string
	fails atomic.Int32
}

func (f *faultyDB) fault(query string) error {
	if strings.Contains(query, f.match) && f.fails.Add(-1) >= 0 {
		return errors.New("injected: connection reset by peer")
	}
	return nil
}

func (f *faultyDB) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	if err := f.fault(query); err != nil {
		return nil, err
	}
	return f.Beginner.ExecContext(ctx, query, args...)
}

func (f *faultyDB) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	if err := f.fault(query); err != nil {
		return nil, err
	}
	return f.Beginner.QueryContext(ctx, query, args...)
}

// A finalize lost with the database connection leaves the rows IN_PROCESS:
// the recovery sends them again. A duplicate, never a loss.
func TestLostFinalizeIsRecoveredAndResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.publish(t, b.clock, "order-created", 4)
	db := &faultyDB{Beginner: b.schema.Beginner, match: "SET status = 'PROCESSED'"}
	db.fails.Store(1)
	rec := newRecorder()
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(db, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)

	require.NoError(t, b.clock.BlockUntilContext(context.Background(), 3))
	require.Equal(t, 4, rec.delivered())
	require.Equal(t, 4, b.status(t, "IN_PROCESS"), "the finalize was lost")
	var pollErr error
	for _, pi := range h.snapshot().polls {
		pollErr = errors.Join(pollErr, pi.Err)
	}
	require.ErrorContains(t, pollErr, "injected: connection reset by peer")

	stepUntil(t, b.clock, 3, time.Second, 15*time.Minute, func() bool { return b.status(t, "PROCESSED") == 4 })
	for _, id := range ids {
		require.Equal(t, 2, rec.deliveries()[id], "sent again after recovery")
	}
	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().Events, "retry_count <> 0"))
}

// unavailableMidBatch confirms the first message of each call and loses the
// connection under the others; with wholeCall it also fails the call.
type unavailableMidBatch struct {
	*recorder
	wholeCall bool
}

func (u unavailableMidBatch) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	lost := fmt.Errorf("connection reset: %w", oncebox.ErrBrokerUnavailable)
	for i := 1; i < len(msgs); i++ {
		errs[i] = lost
	}
	if err := u.recorder.Publish(topic, msgs[0]); err != nil {
		return nil, err
	}
	if u.wholeCall {
		return errs, lost
	}
	return errs, nil
}

func TestConnectionLostMidBatchCountsNoAttempt(t *testing.T) {
	t.Parallel()
	for _, wholeCall := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole call %v", wholeCall), func(t *testing.T) {
			t.Parallel()
			testConnectionLostMidBatch(t, wholeCall)
		})
	}
}

func testConnectionLostMidBatch(t *testing.T, wholeCall bool) {
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	rec := unavailableMidBatch{newRecorder(), wholeCall}
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, rec, nil, cfg)
	require.NoError(t, err)
	start(t, p)
	require.NoError(t, b.clock.BlockUntilContext(context.Background(), 3))
	require.Equal(t, 1, b.status(t, "PROCESSED"), "the confirmed message is kept")
	require.Equal(t, 2, b.schema.Count(t, b.schema.Dialect.Tables().Events, "status = 'PENDING' AND retry_count = 0"),
		"the others are released without an attempt")
	require.Empty(t, h.snapshot().failures)
	require.Equal(t, 1, h.snapshot().unavailable)
}
