package dialecttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/subscriber"
)

// passThrough is a middleware that does nothing, as a logger or a metrics
// middleware between the inbox and Retry would.
func passThrough(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) { return h(msg) }
}

// writesThenFailsOnce is a handler that writes its effect in the inbox's
// transaction and then fails on its first run only.
func writesThenFailsOnce(s *inboxSuite) (*counter, message.HandlerFunc) {
	c := newCounter()
	c.fail = func(_ string, run int) error {
		if run == 1 {
			return errors.New("the last step failed once")
		}
		return nil
	}
	return c, c.handle(s)
}

// startRouter runs r until stop is called or r stops by itself; stop
// waits for Run to return.
func startRouter(t *testing.T, r *message.Router) (stopped <-chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		require.NoError(t, r.Run(context.Background()))
	}()
	<-r.Running()
	t.Cleanup(func() {
		require.NoError(t, r.Close())
		<-done
	})
	return done
}

// A Watermill Retry inside a Transactional inbox, anywhere: behind another
// middleware, on a handler-level middleware after the consumer, on a router
// reading the inbox subscriber. Its attempts would share the inbox's one
// transaction, and the failed attempt's effect would commit with the good
// one's: two effects for one event. The inbox refuses the message instead
// (nothing commits) and stops.
func testInboxRefusesARetryAnywhereInsideIt(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	retry := wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond}

	t.Run("behind another middleware", func(t *testing.T) {
		c, h := writesThenFailsOnce(s)
		in := s.inbox(t)
		key := newID(t).String()
		_, err := in.Middleware(passThrough(retry.Middleware(h)))(event(key))
		require.Equal(t, 0, s.effects(t, key), "no effect commits, let alone two")
		require.Equal(t, 0, s.recorded(t, key))
		require.ErrorIs(t, err, middleware.ErrRetryInsideInbox)
		require.Equal(t, 2, c.count(key), "Retry ran the handler again before the inbox saw it")
	})

	t.Run("on a router reading the inbox subscriber", func(t *testing.T) {
		pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
		in := s.inbox(t)
		sub, err := subscriber.NewInboxSubscriber(pubSub, in, nil)
		require.NoError(t, err)
		router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
		require.NoError(t, err)
		router.AddMiddleware(retry.Middleware)
		c, h := writesThenFailsOnce(s)
		router.AddConsumerHandler("h", "orders", sub, func(msg *message.Message) error { _, err := h(msg); return err })
		startRouter(t, router)
		key := newID(t).String()
		require.NoError(t, pubSub.Publish("orders", event(key)))
		require.Eventually(t, func() bool { return c.count(key) >= 2 }, 10*time.Second, 5*time.Millisecond)
		Never(t, func() bool { return s.effects(t, key) > 0 || s.recorded(t, key) > 0 }, 300*time.Millisecond,
			"an effect committed with Retry inside the inbox subscriber's transaction")
		require.Equal(t, 2, c.count(key), "the redelivery is held, not handled again")
	})
}

// A misuse found (here Retry right inside the inbox, seen when the router
// builds the handler) used to refuse every message at full speed, for ever,
// without a poison queue: the broker redelivered each refusal at once. Now
// the message it was found on is refused, the inbox stops, and what comes
// next is held, unacknowledged, until the router closes (here the test
// closes it; a service closes it through OnMisuse).
func testInboxMisusedWithoutAPoisonQueueDoesNotSpin(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	misuse := make(chan error, 1)
	in := s.inbox(t, func(cfg *middleware.InboxConfig) {
		cfg.OnMisuse = func(err error) { misuse <- err }
	})
	var calls atomic.Int32
	router.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) { calls.Add(1); return h(msg) }
	}, in.Middleware, wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond}.Middleware)
	c := newCounter()
	router.AddConsumerHandler("h", "orders", pubSub, func(msg *message.Message) error { _, err := c.handle(s)(msg); return err })
	stopped := startRouter(t, router)
	key := newID(t).String()
	require.NoError(t, pubSub.Publish("orders", event(key)))
	require.Eventually(t, func() bool { return calls.Load() >= 1 }, 10*time.Second, 5*time.Millisecond)
	select {
	case err := <-misuse:
		require.ErrorIs(t, err, middleware.ErrRetryInsideInbox)
		require.ErrorContains(t, err, "middleware.NewConsumer", "the error names the fix")
	case <-time.After(10 * time.Second):
		t.Fatal("OnMisuse was not called")
	}
	// Stopped, the inbox holds the redelivered message: no refusal at full
	// speed while the router runs. (Once the router closes, the held
	// message's context ends and it is nacked; gochannel may redeliver it
	// with its context already ended until its subscriber is closed: a few
	// calls bounded by the close, not counted here.)
	require.Never(t, func() bool { return calls.Load() > 2 }, 300*time.Millisecond, 10*time.Millisecond,
		"refused once, then held while the router runs")
	require.NoError(t, router.Close())
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the router did not stop")
	}
	require.Equal(t, 0, c.count(key))
	require.Equal(t, 0, s.effects(t, key))
	require.Equal(t, 0, s.recorded(t, key))
}

// Retry added as a handler-level middleware runs inside the router-level
// consumer, so inside its inbox: the composed consumer cannot stop that
// wiring, the inbox finds it when the handler takes its transaction, rolls
// the message back and stops. The consumer's own Retry then tries the
// message again on a stopped inbox, which holds it: nothing is parked, and
// the message stays in the broker for after the fix.
func testConsumerFindsARetryAddedInsideIt(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	poison, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect}, nil)
	require.NoError(t, err)
	misuse := make(chan error, 1)
	in := s.inbox(t, func(cfg *middleware.InboxConfig) { cfg.OnMisuse = func(err error) { misuse <- err } })
	consumer, err := middleware.NewConsumer(middleware.ConsumerConfig{PoisonQueue: poison, Inbox: in,
		Retry: oncebox.RetryConfig{MaxRetries: oncebox.Int(1), InitialInterval: time.Millisecond}}, nil)
	require.NoError(t, err)
	pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	router.AddMiddleware(consumer.Middleware)
	c, h := writesThenFailsOnce(s)
	handler := router.AddConsumerHandler("h", "orders", pubSub, func(msg *message.Message) error { _, err := h(msg); return err })
	// A handler's own logger, then Retry: the router-time check sees the
	// logger, not Retry.
	handler.AddMiddleware(passThrough, wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond}.Middleware)
	startRouter(t, router)
	key := newID(t).String()
	require.NoError(t, pubSub.Publish("orders", event(key)))
	select {
	case err := <-misuse:
		require.ErrorIs(t, err, middleware.ErrRetryInsideInbox)
		require.ErrorContains(t, err, "Retry.Middleware", "the error names the Retry found")
	case <-time.After(10 * time.Second):
		t.Fatal("OnMisuse was not called")
	}
	Never(t, func() bool { return s.effects(t, key) > 0 || s.recorded(t, key) > 0 }, 300*time.Millisecond,
		"an effect committed with Retry inside the inbox")
	require.Equal(t, 2, c.count(key), "the handler's Retry ran it twice; the held message not again")
	require.Equal(t, 0, s.Count(t, s.Tables.DLQ, ""), "held, not parked")
}
