package middleware_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// newRouter returns a router and an in-process pub/sub to subscribe it to,
// closed at the end of the test.
func newRouter(t *testing.T) (*message.Router, *gochannel.GoChannel) {
	t.Helper()
	pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	t.Cleanup(func() { _ = pubSub.Close() })
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	return router, pubSub
}

// runRouter starts r and stops it at the end of the test.
func runRouter(t *testing.T, r *message.Router) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	<-r.Running()
	t.Cleanup(func() {
		require.NoError(t, r.Close())
		require.NoError(t, <-done)
	})
}

func TestPoisonQueueParksFailuresAndTheSubscriptionMovesOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	router, pubSub := newRouter(t)

	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect}, nil)
	require.NoError(t, err)
	c := newCounter()
	handler := c.handle(t, b)
	router.AddMiddleware(
		poison.Middleware,
		wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond}.Middleware,
		b.inbox(t).Middleware,
	)
	router.AddConsumerHandler("orders-handler", "orders", pubSub, func(msg *message.Message) error {
		if string(msg.Payload) == "poison" {
			_, _ = handler(msg)                     // writes an effect in the transaction…
			return errors.New("cannot parse order") // …which rolls back
		}
		_, err := handler(msg)
		return err
	})
	runRouter(t, router)

	good1, bad, good2 := newKey(t), newKey(t), newKey(t)
	poisonMsg := func() *message.Message {
		m := event(bad)
		m.Payload = []byte("poison")
		m.Metadata.Set(oncebox.HeaderEventType, "order-created")
		return m
	}
	require.NoError(t, pubSub.Publish("orders", event(good1), poisonMsg(), event(good2), event(good1)))

	dlq := b.schema.Dialect.Tables().DLQ
	require.Eventually(t, func() bool {
		// gochannel delivers each message on its own goroutine: wait for all.
		return b.effects(t, good1) == 1 && b.effects(t, good2) == 1 && b.schema.Count(t, dlq, "") == 1
	}, 10*time.Second, 5*time.Millisecond, "good2 handled after the poison message")
	dbtest.Never(t, func() bool { return b.effects(t, good1) > 1 }, 200*time.Millisecond, "good1 handled twice")
	require.Equal(t, 1, b.effects(t, good1), "the duplicate was skipped")
	require.Equal(t, 0, b.effects(t, bad), "the failed attempts rolled back")
	require.Equal(t, 3, c.count(bad), "Retry ran inside the poison queue: 1 + 2 retries")
	require.Equal(t, 0, b.recorded(t, bad), "a parked message is not marked processed")

	var eventID, source, handlerName, topic, eventType, status, lastErr string
	var attempts int
	var first, last time.Time
	row := func() {
		require.NoError(t, b.schema.Pool.QueryRow(context.Background(),
			`SELECT event_id::text, source, handler_name, topic, event_type, status, retry_count, last_error,
			        first_failed_at, last_failed_at FROM `+dlq).
			Scan(&eventID, &source, &handlerName, &topic, &eventType, &status, &attempts, &lastErr, &first, &last))
	}
	row()
	require.Equal(t, bad, eventID)
	require.Equal(t, "consumer", source)
	require.Equal(t, "orders-handler", handlerName)
	require.Equal(t, "orders", topic)
	require.Equal(t, "order-created", eventType)
	require.Equal(t, "MOVED", status)
	require.Equal(t, 1, attempts)
	require.Equal(t, "cannot parse order", lastErr)

	// The same message again (a redelivery after a crash between storing and
	// acking): one row, one more attempt.
	require.NoError(t, pubSub.Publish("orders", poisonMsg()))
	require.Eventually(t, func() bool {
		return b.schema.Count(t, dlq, "retry_count = 2") == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, b.schema.Count(t, dlq, ""))
	row()
	require.False(t, last.Before(first))

	// A message without an event id is parked too, unique by its UUID.
	noID := message.NewMessage(watermill.NewUUID(), []byte("x"))
	require.NoError(t, pubSub.Publish("orders", noID, noID.Copy()))
	require.Eventually(t, func() bool {
		return b.schema.Count(t, dlq, "event_id IS NULL AND message_uuid = $1 AND retry_count = 2", noID.UUID) == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 0, c.count(""), "never handled")
}

func TestPoisonQueueStoreFailureNacks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect}, nil)
	require.NoError(t, err)
	_, err = b.schema.Pool.Exec(context.Background(), "DROP TABLE "+b.schema.Dialect.Tables().DLQ)
	require.NoError(t, err)
	h := poison.Middleware(func(*message.Message) ([]*message.Message, error) { return nil, errors.New("bad") })
	_, err = h(event(newKey(t)))
	require.ErrorContains(t, err, "bad")
	require.ErrorContains(t, err, "store message", "the store error is returned: the message is nacked, not lost")

	_, err = middleware.NewPoisonQueue(nil, middleware.PoisonConfig{}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "poison queue: db is nil")
	require.ErrorContains(t, err, "PoisonConfig.Dialect is nil")
}

func TestWarnsAboutEarlyAcks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logger := capture()
	in, err := middleware.NewInbox(b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect}, logger)
	require.NoError(t, err)
	// The mistake: middleware.InstantAck outside the inbox acks before it runs.
	h := wmw.InstantAck(in.Middleware(newCounter().handle(t, b)))
	_, err = h(event(newKey(t)))
	require.NoError(t, err)
	require.True(t, logged(logger, "acked before the inbox ran"))

	// The right order logs nothing.
	logger = capture()
	in, err = middleware.NewInbox(b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect}, logger)
	require.NoError(t, err)
	_, err = in.Middleware(newCounter().handle(t, b))(event(newKey(t)))
	require.NoError(t, err)
	require.False(t, logged(logger, "acked before the inbox ran"))
}

func TestWarnsAboutTwoHandlersSharingTheInboxForOneTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	router, pubSub := newRouter(t)
	logger := capture()
	in, err := middleware.NewInbox(b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect,
		SharedNamespace: true}, logger) // the behaviour before namespaces were per handler
	require.NoError(t, err)

	router.AddMiddleware(in.Middleware)
	c := newCounter()
	for _, name := range []string{"billing", "shipping"} { // two handlers, one topic, one namespace
		router.AddConsumerHandler(name, "orders", pubSub, func(msg *message.Message) error {
			_, err := c.handle(t, b)(msg)
			return err
		})
	}
	runRouter(t, router)
	key := newKey(t)
	require.NoError(t, pubSub.Publish("orders", event(key)))
	require.Eventually(t, func() bool {
		return logged(logger, "two handlers share one inbox namespace") && c.count(key) == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.Never(t, func() bool { return c.count(key) > 1 }, 200*time.Millisecond, 10*time.Millisecond,
		"the second handler skips the event: hence the warning")
}
