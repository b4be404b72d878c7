package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// The metrics move as expected across a whole run on the real PostgreSQL and
// an in-process Kafka: publish → relay → consume → duplicate → failure → DLQ.
func TestMetricsAcrossPublishRelayConsumeDuplicateFailureDLQ(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	reg := prometheus.NewRegistry()
	relayHooks, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	inboxHooks, err := metrics.NewInboxHooks(reg)
	require.NoError(t, err)
	poisonHooks, err := metrics.NewPoisonHooks(reg)
	require.NoError(t, err)
	backlog, err := metrics.NewBacklogCollector(s.Beginner, s.Dialect, metrics.BacklogConfig{TTL: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, reg.Register(backlog))

	// Four events, one of which the consumer cannot handle.
	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{Events: map[string]oncebox.EventSettings{
		"order-created": {Topic: "orders", Polling: oncebox.PollingSettings{MinFixedDelay: 5 * time.Millisecond,
			MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}}}}}
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: s.Dialect, Oncebox: cfg}, nil)
	require.NoError(t, err)
	msgs := []*message.Message{
		message.NewMessage("m1", []byte("ok")), message.NewMessage("m2", []byte("ok")),
		message.NewMessage("m3", []byte("ok")), message.NewMessage("m4", []byte("poison")),
	}
	require.NoError(t, pub.Publish("order-created", msgs...))
	require.NoError(t, tx.Commit(ctx))

	kpub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers}, watermill.NopLogger{})
	require.NoError(t, err)
	defer kpub.Close()
	relay, err := poller.New(s.Beginner, kpub, poller.Config{Dialect: s.Dialect, Oncebox: cfg, Hooks: relayHooks}, nil)
	require.NoError(t, err)

	sub, err := kafkawm.NewSubscriber(kafka.RecommendedSubscriberConfig(brokers, "metrics-e2e"), watermill.NopLogger{})
	require.NoError(t, err)
	inbox, err := middleware.NewInbox(s.Beginner, middleware.InboxConfig{Dialect: s.Dialect, Hooks: inboxHooks}, nil)
	require.NoError(t, err)
	poison, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect,
		OnParked: poisonHooks.OnParked, OnStoreFailed: poisonHooks.OnStoreFailed}, nil)
	require.NoError(t, err)
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	router.AddMiddleware(poison.Middleware, wmw.Retry{MaxRetries: 1, InitialInterval: time.Millisecond}.Middleware, inbox.Middleware)
	router.AddConsumerHandler("ship-order", "orders", sub, func(msg *message.Message) error {
		if string(msg.Payload) == "poison" {
			return errors.New("cannot parse the order")
		}
		return nil
	})

	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 2)
	go func() { errc <- relay.Run(runCtx) }()
	go func() { errc <- router.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-errc)
		require.NoError(t, <-errc)
	}()

	consumed := map[string]string{"inbox_namespace": "ship-order"}
	require.Eventually(t, func() bool {
		v, ok := value(t, reg, "oncebox_inbox_consumed_total", consumed)
		p, okP := value(t, reg, "oncebox_poison_parked_total", map[string]string{"handler": "ship-order"})
		return ok && v == 3 && okP && p == 1
	}, 45*time.Second, 20*time.Millisecond, "three handled, one parked")

	// A duplicate, as a lost confirm would make it.
	dup := msgs[0].Copy()
	dup.Metadata.Set(oncebox.HeaderEventType, "order-created")
	require.NoError(t, kpub.Publish("orders", dup))
	require.Eventually(t, func() bool {
		v, ok := value(t, reg, "oncebox_inbox_duplicates_total", map[string]string{"inbox_namespace": "ship-order", "source": "table"})
		return ok && v == 1
	}, 30*time.Second, 20*time.Millisecond, "the duplicate is dropped by the inbox")

	require.Equal(t, 4.0, mustValue(t, reg, "oncebox_outbox_events_sent_total", map[string]string{"event_type": "order-created"}))
	require.Equal(t, 3.0, mustValue(t, reg, "oncebox_inbox_consumed_total", consumed))
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_inbox_failed_total", consumed), "the poison message, tried twice by Retry")
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_poison_parked_total", map[string]string{"handler": "ship-order"}))
	require.Eventually(t, func() bool {
		v, ok := value(t, reg, "oncebox_outbox_events", map[string]string{"event_type": "order-created", "status": "PROCESSED"})
		return ok && v == 4
	}, 10*time.Second, 20*time.Millisecond, "the backlog gauge sees four PROCESSED rows")
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_dlq_events", map[string]string{"status": "MOVED", "source": "consumer"}))
}
