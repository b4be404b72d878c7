package rabbitmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/internal/tcpproxy"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// TestRelayStartsDuringAnOutage runs the real relay (poller.New and Run)
// on a publisher whose broker is down (a killed proxy in front of the real
// RabbitMQ): it starts, the events committed meanwhile wait, and once the
// broker is back at the same address every one is delivered, none FAILED
// and no attempt counted.
func TestRelayStartsDuringAnOutage(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	s := pgtest.NewSchema(t)
	queue := uniqueName(t, "oncebox-test-start-outage")
	declareQueue(t, conn, queue)
	target := brokerAddr(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:0", target)
	addr := proxy.Addr()
	proxy.Kill() // down before the relay starts

	pub := newPublisher(t, rabbitmq.PublisherConfig{URL: urlVia(t, addr), DialTimeout: 2 * time.Second})
	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{Polling: oncebox.PollingSettings{
			MinFixedDelay: 5 * time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}},
		Events: map[string]oncebox.EventSettings{"order-created": {Topic: queue}},
	}}
	hooks := &pollertest.Hooks{}
	p, err := poller.New(s.Beginner, pub, poller.Config{
		Dialect: s.Dialect, Oncebox: cfg, Hooks: hooks,
		OutageBackoff: poller.Schedule{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2},
	}, watermill.NopLogger{})
	require.NoError(t, err, "the relay starts while the broker is down")
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	<-p.Running()

	ctx := context.Background()
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	outbox, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: s.Dialect, Oncebox: cfg}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, 30)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, `{"n":%d}`, i))
		oncebox.SetKey(msgs[i], fmt.Sprintf("order-%d", i%4))
	}
	require.NoError(t, outbox.Publish("order-created", msgs...))
	require.NoError(t, tx.Commit(ctx))
	require.Eventually(t, func() bool { _, _, u := hooks.Counts(); return u >= 1 }, 20*time.Second, 10*time.Millisecond,
		"the poller met the outage")

	tcpproxy.Start(t, addr, target) // back, at the same address
	events := s.Dialect.Tables().Events
	require.Eventually(t, func() bool { return s.Count(t, events, "status = 'PROCESSED'") == len(msgs) },
		30*time.Second, 10*time.Millisecond)
	require.Zero(t, s.Count(t, events, "status = 'FAILED'"))
	require.Zero(t, s.Count(t, events, "retry_count > 0"), "an outage counts no attempt")
	sent, failed, _ := hooks.Counts()
	require.Equal(t, len(msgs), sent)
	require.Zero(t, failed)

	got := drain(t, conn, queue, len(msgs))
	// One type: each key's events in claim order (a batch is spread over
	// channels by key).
	requireOrderPerKey(t, msgs, got)
	byUUID := map[string]*message.Message{}
	for _, m := range msgs {
		byUUID[m.UUID] = m
	}
	for _, d := range got {
		require.Equal(t, byUUID[d.MessageId].Metadata.Get(oncebox.HeaderEventID), d.Headers[oncebox.HeaderEventID])
	}
}
