package rabbitmq_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// failures records what the poller reports.
type failures struct {
	poller.NopHooks
	mu   sync.Mutex
	list []poller.Failure
}

func (h *failures) SendFailed(_ string, f []poller.Failure) {
	h.mu.Lock()
	h.list = append(h.list, f...)
	h.mu.Unlock()
}

func (h *failures) snapshot() []poller.Failure {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]poller.Failure(nil), h.list...)
}

// An unroutable RabbitMQ message is retried and ends in the DLQ, not lost;
// the routable events of the same relay arrive with their headers.
func TestPollerRetriesAnUnroutableEventThenMovesItToTheDLQ(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	schema := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))

	// The event type is the topic, the topic the queue (default exchange).
	routed := uniqueName(t, "oncebox-test-relay-ok")
	lost := uniqueName(t, "oncebox-test-relay-lost") // no queue: unroutable
	declareQueue(t, conn, routed)

	ctx := context.Background()
	tx, err := schema.Pool.Begin(ctx)
	require.NoError(t, err)
	outbox, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: schema.Dialect, Clock: clock}, nil)
	require.NoError(t, err)
	okMsgs := []*message.Message{
		message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`)),
		message.NewMessage(watermill.NewUUID(), []byte(`{"n":2}`)),
		message.NewMessage(watermill.NewUUID(), []byte(`{"n":3}`)),
	}
	oncebox.SetKey(okMsgs[0], "customer-1")
	require.NoError(t, outbox.Publish(routed, okMsgs...))
	lostMsg := message.NewMessage(watermill.NewUUID(), []byte(`{"n":4}`))
	require.NoError(t, outbox.Publish(lost, lostMsg))
	require.NoError(t, tx.Commit(ctx))

	pub := newPublisher(t, rabbitmq.PublisherConfig{})
	h := &failures{}
	// The fake clock runs ahead while a real send is in flight (the loops
	// and jobs wait on it): with the 12 s default a live claim could look
	// dead, be recovered and sent again, and its attempt reported twice.
	cfg := poller.Config{Dialect: schema.Dialect, EventTypes: []string{routed, lost}, Clock: clock, Hooks: h,
		HeartbeatTimeout: 2 * time.Minute}
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	p, err := poller.New(schema.Beginner, pub, cfg, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	<-p.Running()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})

	dlq := schema.Dialect.Tables().DLQ
	// Waiting on the clock: two poll loops, recovery, clean-up, DLQ transfer.
	stepUntil(t, clock, 5, 250*time.Millisecond, 10*time.Minute, func() bool { return schema.Count(t, dlq, "") == 1 })

	fs := h.snapshot()
	require.Len(t, fs, 4, "max-retries 3: four attempts")
	for k, f := range fs {
		require.Equal(t, k+1, f.Attempt)
		require.ErrorIs(t, f.Err, rabbitmq.ErrUnroutable)
	}
	require.True(t, fs[3].Final)

	var eventID, status, lastErr string
	var retries int
	require.NoError(t, schema.Pool.QueryRow(ctx,
		"SELECT event_id::text, status, retry_count, last_error FROM "+dlq).Scan(&eventID, &status, &retries, &lastErr))
	require.Equal(t, lostMsg.Metadata.Get(oncebox.HeaderEventID), eventID)
	require.Equal(t, "MOVED", status)
	require.Equal(t, 4, retries)
	require.Contains(t, lastErr, "unroutable")
	require.Contains(t, lastErr, lost)

	got := drain(t, conn, routed, len(okMsgs))
	// One batch: the unkeyed events in claim (publish) order on one channel,
	// the keyed one on its key's (requireOrderPerKey reads the key header).
	requireOrderPerKey(t, okMsgs, got)
	for _, d := range got {
		i := slices.IndexFunc(okMsgs, func(m *message.Message) bool { return m.UUID == d.MessageId })
		require.Equal(t, []byte(okMsgs[i].Payload), d.Body)
		require.Equal(t, okMsgs[i].Metadata.Get(oncebox.HeaderEventID), d.Headers[oncebox.HeaderEventID])
		require.Equal(t, routed, d.Headers[oncebox.HeaderEventType])
	}
	require.Equal(t, 0, schema.Count(t, schema.Dialect.Tables().Events, "status <> 'PROCESSED'"))
}

// stepUntil advances the fake clock by step whenever the given number of
// goroutines wait on it, until cond holds or the budget of simulated time is
// spent.
func stepUntil(t *testing.T, clock *clockwork.FakeClock, waiters int, step, budget time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var spent time.Duration
	for {
		require.NoError(t, clock.BlockUntilContext(ctx, waiters), "waiting for %d goroutines to wait on the clock", waiters)
		if cond() {
			return
		}
		require.Less(t, spent, budget, "condition not met after %s of simulated time", budget)
		clock.Advance(step)
		spent += step
	}
}
