package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// commitEvents publishes n events of type order-created through the
// transactional outbox publisher, keyed by order, and returns them.
func commitEvents(t *testing.T, s *pgtest.Schema, cfg oncebox.Config, n int, tag string) []*message.Message {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: s.Dialect, Oncebox: cfg}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf(`{"%s":%d}`, tag, i)))
		msgs[i].Metadata.Set("source", "relay-test")
		oncebox.SetKey(msgs[i], fmt.Sprintf("order-%d", i%5))
	}
	require.NoError(t, pub.Publish("order-created", msgs...))
	require.NoError(t, tx.Commit(ctx))
	return msgs
}

// TestRelayThroughThePollerToKafka runs the real relay: events committed to
// PostgreSQL, claimed by the poller, sent with the Publisher's
// PublishBatch, consumed with watermill-kafka's subscriber. Then the
// cluster stops: the poller releases its batches without counting an
// attempt.
func TestRelayThroughThePollerToKafka(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	cluster, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
	pub := newPublisher(t, addrs, fastFailConfig())

	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{Polling: oncebox.PollingSettings{
			MinFixedDelay: 5 * time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}},
		Events: map[string]oncebox.EventSettings{"order-created": {Topic: "orders"}},
	}}
	msgs := commitEvents(t, s, cfg, 120, "n")

	hooks := &pollertest.Hooks{}
	p, err := poller.New(s.Beginner, pub, poller.Config{Dialect: s.Dialect, Oncebox: cfg, Hooks: hooks}, watermill.NopLogger{})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	<-p.Running()

	want := map[string]*message.Message{}
	for _, m := range msgs {
		want[m.Metadata.Get(oncebox.HeaderEventID)] = m
	}
	ch := subscribe(t, kafka.RecommendedSubscriberConfig(addrs, "shipping"), "orders")
	for range len(msgs) {
		got := receive(t, ch)
		id := got.Metadata.Get(oncebox.HeaderEventID)
		m, ok := want[id]
		require.True(t, ok, "event id %q delivered once, and published", id)
		delete(want, id)
		require.Equal(t, m.UUID, got.UUID)
		require.Equal(t, m.Payload, got.Payload)
		require.Equal(t, "order-created", got.Metadata.Get(oncebox.HeaderEventType))
		require.Equal(t, "relay-test", got.Metadata.Get("source"))
		require.Equal(t, oncebox.Key(m), oncebox.Key(got))
		got.Ack()
	}
	events := s.Dialect.Tables().Events
	require.Eventually(t, func() bool { return s.Count(t, events, "status = 'PROCESSED'") == len(msgs) },
		10*time.Second, 10*time.Millisecond)
	sent, failed, _ := hooks.Counts()
	require.Equal(t, len(msgs), sent)
	require.Zero(t, failed)

	// The broker goes away: new events are claimed, the sends fail as
	// unavailable, the rows go back to PENDING with no attempt counted.
	cluster.Close()
	commitEvents(t, s, cfg, 30, "late")
	require.Eventually(t, func() bool { _, _, u := hooks.Counts(); return u >= 3 }, 20*time.Second, 10*time.Millisecond,
		"the poller saw the broker unavailable")
	_, failed, _ = hooks.Counts()
	require.Zero(t, failed, "an outage counts no attempt")
	require.Zero(t, s.Count(t, events, "retry_count > 0"))
	require.Equal(t, len(msgs), s.Count(t, events, "status = 'PROCESSED'"))
}
