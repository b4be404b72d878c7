package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/internal/tcpproxy"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// A forwarder user's publisher, watermill-amqp's own (durable queue
// preset), as publisherOut with the default IsUnavailable: the broker goes
// away for this publisher (its proxy is killed) while events wait, and
// comes back at the same address. The batches are released without an
// attempt while it is down, and every event is delivered once
// watermill-amqp has reconnected: none FAILED, retry_count 0. Before, its
// "not connected to AMQP" and amqp.ErrClosed errors counted an attempt per
// event, and with max-retries 1 every event ended FAILED.
func TestWatermillAMQPPublisherOutageCountsNoAttempt(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	schema := pgtest.NewSchema(t)
	queue := uniqueName(t, "oncebox-test-wm-outage")
	declareQueue(t, conn, queue)
	target := brokerAddr(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:0", target)
	addr := proxy.Addr()

	wmCfg := amqpwm.NewDurableQueueConfig(urlVia(t, addr))
	// Reconnect within a second of the broker's return, not after
	// watermill-amqp's default backoff of up to a minute.
	wmCfg.Connection.Reconnect = &amqpwm.ReconnectConfig{BackoffInitialInterval: 50 * time.Millisecond,
		BackoffMultiplier: 1.5, BackoffMaxInterval: 500 * time.Millisecond}
	noticed := &lossNoticed{seen: make(chan struct{})}
	pub, err := amqpwm.NewPublisher(wmCfg, noticed)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })

	proxy.Kill() // the broker is gone for this publisher only
	// watermill-amqp v3.0.2 replaces its "connected" channel without a lock
	// when it notices the loss (connection.go, handleConnectionClose), a
	// data race with a Publish at that moment which the race detector
	// reports. The relay starts once watermill-amqp has noticed: its log
	// line orders the replacement before every Publish of the test.
	select {
	case <-noticed.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("watermill-amqp did not notice the connection loss")
	}

	ctx := context.Background()
	tx, err := schema.Pool.Begin(ctx)
	require.NoError(t, err)
	outbox, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: schema.Dialect}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, 5)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, `{"order":%d}`, i))
	}
	require.NoError(t, outbox.Publish(queue, msgs...)) // the event type is the topic, the topic the queue
	require.NoError(t, tx.Commit(ctx))

	h := &pollertest.Hooks{}
	cfg := poller.Config{Dialect: schema.Dialect, EventTypes: []string{queue}, Hooks: h,
		OutageBackoff: poller.Schedule{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2}}
	cfg.Oncebox.Outbox.Defaults.MaxRetries = oncebox.Int(1)
	cfg.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: 5 * time.Millisecond,
		MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}
	p, err := poller.New(schema.Beginner, pub, cfg, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	<-p.Running()

	events := schema.Dialect.Tables().Events
	require.Eventually(t, func() bool { s := h.Snapshot(); return s.Unavailable >= 3 || len(s.Failures) > 0 },
		60*time.Second, 10*time.Millisecond, "the poller tried the unreachable broker")
	require.Empty(t, h.Snapshot().Failures, "an outage counts no attempt")
	require.Zero(t, schema.Count(t, events, "retry_count > 0 OR status = 'FAILED'"))

	tcpproxy.Start(t, addr, target) // back, at the same address
	// watermill-amqp's Close waits for the broker's close-ok forever if the
	// connection drops meanwhile (amqp091-go then blocks on a close
	// notification nobody reads): close the relay and the publisher before
	// this proxy is killed at the end of the test.
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, pub.Close())
	})
	require.Eventually(t, func() bool { return schema.Count(t, events, "status = 'PROCESSED'") == len(msgs) },
		60*time.Second, 10*time.Millisecond, "every event delivered once watermill-amqp has reconnected")
	require.Empty(t, h.Snapshot().Failures)
	require.Zero(t, schema.Count(t, events, "retry_count > 0 OR status = 'FAILED'"), "none FAILED, no attempt counted")

	got := map[string]bool{}
	for _, d := range drain(t, conn, queue, len(msgs)) {
		id, _ := d.Headers[amqpwm.DefaultMessageUUIDHeaderKey].(string)
		got[id] = true
	}
	for _, m := range msgs {
		require.True(t, got[m.UUID], "event %s in the queue", m.UUID)
	}
}

// The poller's default IsUnavailable knows amqp091-go's connection errors
// and watermill-amqp's own, as its publisher wraps them, without importing
// either; a channel exception about what was published is a refusal.
func TestPollerDefaultKnowsAMQPOutageErrors(t *testing.T) {
	t.Parallel()
	unavailable := []error{
		fmt.Errorf("cannot open channel: create AMQP channel: %w", amqp.ErrClosed),
		fmt.Errorf("cannot publish msg: %w", amqp.ErrClosed),
		&amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'", Server: true},
		&amqp.Error{Code: amqp.FrameError, Reason: "frame could not be parsed"},
		&amqp.Error{Code: amqp.ResourceError, Reason: "RESOURCE_ERROR", Server: true},
		errors.New("not connected to AMQP"),
		errors.New("pub/sub is connection closedChan"),
	}
	for _, err := range unavailable {
		require.True(t, poller.IsUnavailable(err), "%v", err)
	}
	refusals := []error{
		&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange 'orders' in vhost '/'", Server: true, Recover: true},
		&amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - message size 200000000 is larger than configured max size", Server: true, Recover: true},
		&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED", Server: true, Recover: true},
		fmt.Errorf("delivery not confirmed for message [%s]", watermill.NewUUID()),
		(*amqp.Error)(nil),
	}
	for _, err := range refusals {
		require.False(t, poller.IsUnavailable(err), "%v", err)
	}
}

// lossNoticed is a logger that tells when watermill-amqp has noticed that
// its connection was closed.
type lossNoticed struct {
	watermill.NopLogger
	once sync.Once
	seen chan struct{}
}

func (l *lossNoticed) Error(msg string, _ error, _ watermill.LogFields) {
	if strings.HasPrefix(msg, "Received close notification from AMQP") {
		l.once.Do(func() { close(l.seen) })
	}
}
