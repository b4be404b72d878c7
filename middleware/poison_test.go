package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// poisonCalls records the calls of the PoisonQueue hooks.
type poisonCalls struct {
	mu           sync.Mutex
	parked       []string
	storeFailed  []string
	parkedErr    error
	storeFailErr error
}

func (p *poisonCalls) onParked(handler string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parked = append(p.parked, handler)
	p.parkedErr = err
}

func (p *poisonCalls) onStoreFailed(handler string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.storeFailed = append(p.storeFailed, handler)
	p.storeFailErr = err
}

func (p *poisonCalls) counts() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked), len(p.storeFailed)
}

// findLog returns the first captured line containing msg.
func findLog(l *watermill.CaptureLoggerAdapter, msg string) (watermill.CapturedMessage, bool) {
	for _, msgs := range l.Captured() {
		for _, m := range msgs {
			if m.Msg == msg {
				return m, true
			}
		}
	}
	return watermill.CapturedMessage{}, false
}

func TestPoisonQueueHooksAndLogUnderARouter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	router, pubSub := newRouter(t)
	calls := &poisonCalls{}
	logger := capture()
	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect,
		OnParked: calls.onParked, OnStoreFailed: calls.onStoreFailed}, logger)
	require.NoError(t, err)
	router.AddMiddleware(poison.Middleware)
	router.AddConsumerHandler("billing-handler", "orders", pubSub, func(msg *message.Message) error {
		if string(msg.Payload) == "poison" {
			return errors.New("cannot parse order")
		}
		return nil
	})
	runRouter(t, router)

	key := newKey(t)
	bad := event(key)
	bad.Payload = []byte("poison")
	bad.Metadata.Set(oncebox.HeaderEventType, "order-created")
	require.NoError(t, pubSub.Publish("orders", event(newKey(t)), bad))
	require.Eventually(t, func() bool {
		parked, _ := calls.counts()
		return parked == 1
	}, 10*time.Second, 5*time.Millisecond)
	calls.mu.Lock()
	require.Equal(t, []string{"billing-handler"}, calls.parked)
	require.EqualError(t, calls.parkedErr, "cannot parse order")
	require.Empty(t, calls.storeFailed)
	calls.mu.Unlock()

	line, ok := findLog(logger, "Message parked in the DLQ")
	require.True(t, ok)
	require.Equal(t, watermill.ErrorLogLevel, line.Level)
	require.Equal(t, key, line.Fields["event_id"])
	require.Equal(t, "order-created", line.Fields["event_type"])
	require.Equal(t, "billing-handler", line.Fields["handler"])
	require.Equal(t, bad.UUID, line.Fields["message_uuid"])
	require.EqualError(t, line.Err, "cannot parse order")
	require.Empty(t, logger.Captured()[watermill.InfoLogLevel], "no INFO line per message")
}

func TestPoisonQueueStoreFailureHookAndLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := &poisonCalls{}
	logger := capture()
	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect,
		OnParked: calls.onParked, OnStoreFailed: calls.onStoreFailed}, logger)
	require.NoError(t, err)
	_, err = b.schema.Pool.Exec(context.Background(), "DROP TABLE "+b.schema.Dialect.Tables().DLQ)
	require.NoError(t, err)
	h := poison.Middleware(func(*message.Message) ([]*message.Message, error) { return nil, errors.New("bad") })
	key := newKey(t)
	_, err = h(event(key))
	require.Error(t, err)
	parked, failed := calls.counts()
	require.Equal(t, 0, parked)
	require.Equal(t, 1, failed)
	require.ErrorContains(t, calls.storeFailErr, "store message", "the store's error, not the handler's")

	line, ok := findLog(logger, "Could not store a poison message in the DLQ; it will be redelivered")
	require.True(t, ok)
	require.Equal(t, key, line.Fields["event_id"])
	require.Equal(t, "bad", line.Fields["handler_error"])

	// Without hooks nothing is called and nothing breaks.
	plain, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect}, nil)
	require.NoError(t, err)
	_, err = plain.Middleware(func(*message.Message) ([]*message.Message, error) { return nil, errors.New("bad") })(event(newKey(t)))
	require.Error(t, err)
}

// A handler error that means "try later" (here a real one: its database
// refused the connection) is nacked, not parked: the message comes back and
// is handled once the database is there again. A plain error still parks.
func TestPoisonQueueNacksTransientErrorsAndParksTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := l.Addr().String()
	require.NoError(t, l.Close())
	_, refused := pgx.Connect(context.Background(), "postgres://root@"+down+"/test?sslmode=disable")
	require.Error(t, refused)

	router, pubSub := newRouter(t)
	calls := &poisonCalls{}
	var mu sync.Mutex
	var nacked []error
	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect,
		OnParked: calls.onParked, OnStoreFailed: calls.onStoreFailed,
		OnNacked: func(_ string, err error) { mu.Lock(); nacked = append(nacked, err); mu.Unlock() }}, nil)
	require.NoError(t, err)
	router.AddMiddleware(poison.Middleware)
	var handled sync.Map
	tries := map[string]int{}
	router.AddConsumerHandler("h", "orders", pubSub, func(msg *message.Message) error {
		mu.Lock()
		tries[string(msg.Payload)]++
		n := tries[string(msg.Payload)]
		mu.Unlock()
		switch {
		case string(msg.Payload) == "transient" && n == 1:
			return fmt.Errorf("save order: %w", refused)
		case string(msg.Payload) == "poison":
			return errors.New("cannot parse order")
		}
		handled.Store(string(msg.Payload), true)
		return nil
	})
	runRouter(t, router)

	for _, p := range []string{"transient", "poison"} {
		msg := event(newKey(t))
		msg.Payload = []byte(p)
		require.NoError(t, pubSub.Publish("orders", msg))
	}
	require.Eventually(t, func() bool {
		_, ok := handled.Load("transient")
		parked, _ := calls.counts()
		return ok && parked == 1
	}, 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, nacked, 1, "the transient error was nacked once")
	require.ErrorIs(t, nacked[0], refused)
	require.Equal(t, 2, tries["transient"], "redelivered, then handled")
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, ""), "only the poison message is parked")
}
