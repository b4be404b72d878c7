package service_test

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

	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/service"
)

// relayYAML is a producing service on the test's schema, polling fast.
const relayYAML = `
  tables: {schema: %s}
  outbox:
    defaults: {polling: {min-fixed-delay: 1ms, max-fixed-delay: 10ms}}
`

// newBroker is a subscriber of its own for one router: a router closes its
// handlers' subscribers when it stops.
func newBroker(t *testing.T, persistent bool) *gochannel.GoChannel {
	g := gochannel.NewGoChannel(gochannel.Config{Persistent: persistent}, watermill.NopLogger{})
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func newRouter(t *testing.T) *message.Router {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	require.NoError(t, err)
	return r
}

// runAsync runs svc and returns the channel of Run's error.
func runAsync(ctx context.Context, svc *service.Service) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- svc.Run(ctx) }()
	return errc
}

// returned waits up to a minute for Run's error.
func returned(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
		return nil
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// subscribeGate holds the router's Subscribe back until the relay runs,
// for at most a second: a Run that started the relay beside the router
// (rather than after it) lets the relay run first, every time.
type subscribeGate struct {
	message.Subscriber
	relayRunning func() chan struct{}
	relayFirst   atomic.Bool
}

func (g *subscribeGate) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-g.relayRunning():
		g.relayFirst.Store(true)
	case <-time.After(time.Second): // the relay did not start: the wait proves it does not
	}
	return g.Subscriber.Subscribe(ctx, topic)
}

// The finding: the minimal example waited for router.Running() by hand
// before starting the service; with WithRouter the service does it. The
// broker drops what is published before a subscription (as RabbitMQ drops a
// message to a queue not yet declared), so an event committed before Run
// reaches the handler only if the relay waits for the router.
func TestTheRelayStartsOnceTheRouterRuns(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	broker := newBroker(t, false) // what is published before a subscription is dropped
	router := newRouter(t)
	svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(broker), service.WithRouter(router))
	gate := &subscribeGate{Subscriber: broker, relayRunning: svc.Relay().Running}
	got := make(chan string, 10)
	router.AddConsumerHandler("ship-order", "order-placed", gate, func(msg *message.Message) error {
		got <- string(msg.Payload)
		return nil
	})

	tx := b.begin(t)
	pub, err := svc.Publisher(tx)
	require.NoError(t, err)
	require.NoError(t, pub.Publish("order-placed", message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`))))
	require.NoError(t, tx.Commit())

	errc := runAsync(context.Background(), svc)
	var payload string
	b.eventually(t, "the event committed before Run reaches the handler", 10*time.Millisecond, func() bool {
		select {
		case payload = <-got:
			return true
		default:
			return false
		}
	})
	require.JSONEq(t, `{"order":1}`, payload)
	require.False(t, gate.relayFirst.Load(), "the relay ran before the router had subscribed")
	require.True(t, router.IsRunning())
	require.NoError(t, svc.Close())
	require.NoError(t, returned(t, errc))
	require.True(t, router.IsClosed(), "Run closed the router")
}

// A router that fails to start stops Run with its error, before the relay
// starts, and Running is closed all the same. (The failure is a plugin's:
// a router whose Subscribe failed leaks Watermill's watcher goroutine, which
// the leak check of TestMain would report.)
func TestARouterThatFailsStopsTheService(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	router := newRouter(t)
	router.AddPlugin(func(*message.Router) error { return errors.New("the broker is not reachable") })
	router.AddConsumerHandler("ship-order", "order-placed", newBroker(t, true), func(*message.Message) error { return nil })
	var goCtxDone atomic.Bool
	svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker), service.WithRouter(router))
	svc.Go(func(ctx context.Context) error {
		<-ctx.Done()
		goCtxDone.Store(true)
		return nil
	})

	err := returned(t, runAsync(context.Background(), svc))
	require.ErrorContains(t, err, "oncebox: service: router: cannot initialize plugin")
	require.ErrorContains(t, err, "the broker is not reachable")
	require.True(t, isClosed(svc.Running()), "Running closed although Run failed")
	require.False(t, isClosed(svc.Relay().Running()), "the relay never started")
	require.True(t, goCtxDone.Load(), "the function given to Go was stopped")
	require.NoError(t, svc.Close())
}

// A router closed from outside (Watermill's SignalsHandler plugin does it
// on SIGTERM) stops the service: the relay and the Go functions with it.
func TestARouterThatStopsStopsTheService(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	router := newRouter(t)
	router.AddConsumerHandler("ship-order", "order-placed", newBroker(t, true), func(*message.Message) error { return nil })
	svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker), service.WithRouter(router))
	stopped := make(chan struct{})
	svc.Go(func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		return nil
	})
	errc := runAsync(context.Background(), svc)
	<-svc.Running()
	require.True(t, router.IsRunning())
	require.NoError(t, router.Close())
	require.NoError(t, returned(t, errc))
	require.True(t, isClosed(stopped))
}

// Close stops the router in every order of Run and Close; a router without
// handlers, which ignores its context, stops too. A router that never ran
// is left as it is.
func TestCloseClosesTheRouter(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	build := func(withHandler bool) (*service.Service, *message.Router) {
		router := newRouter(t)
		if withHandler {
			router.AddConsumerHandler("ship-order", "order-placed", newBroker(t, true), func(*message.Message) error { return nil })
		}
		return b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker), service.WithRouter(router)), router
	}

	t.Run("Close before Run", func(t *testing.T) {
		svc, router := build(true)
		require.NoError(t, svc.Close())
		require.True(t, isClosed(svc.Running()))
		require.NoError(t, returned(t, runAsync(context.Background(), svc)), "Run after Close returns at once")
		require.False(t, router.IsRunning(), "the router was never run")
		require.False(t, router.IsClosed(), "nor closed: Watermill's Close would wait for handlers that never ran")
	})
	t.Run("Run then Close", func(t *testing.T) {
		svc, router := build(true)
		errc := runAsync(context.Background(), svc)
		<-svc.Running()
		require.True(t, router.IsRunning())
		require.NoError(t, svc.Close())
		require.True(t, router.IsClosed())
		require.NoError(t, returned(t, errc))
		require.ErrorContains(t, svc.Run(context.Background()), "Run called twice")
	})
	t.Run("Run ended by its context, router without handlers", func(t *testing.T) {
		svc, router := build(false)
		ctx, cancel := context.WithCancel(context.Background())
		errc := runAsync(ctx, svc)
		<-svc.Running()
		cancel()
		require.NoError(t, returned(t, errc))
		require.True(t, router.IsClosed())
		require.NoError(t, svc.Close())
	})
	t.Run("Close while the router subscribes", func(t *testing.T) {
		router := newRouter(t)
		subscribing := make(chan struct{})
		router.AddConsumerHandler("ship-order", "order-placed", blockingSubscriber{newBroker(t, true), subscribing},
			func(*message.Message) error { return nil })
		svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker), service.WithRouter(router))
		errc := runAsync(context.Background(), svc)
		<-subscribing
		require.NoError(t, svc.Close())
		require.True(t, isClosed(svc.Running()))
		require.NoError(t, returned(t, errc))
		require.True(t, router.IsClosed())
		require.False(t, isClosed(svc.Relay().Running()), "the relay never started")
	})
}

// blockingSubscriber's Subscribe waits for its context to end, as a
// subscriber does whose broker is not reachable yet.
type blockingSubscriber struct {
	message.Subscriber
	subscribing chan struct{}
}

func (s blockingSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	close(s.subscribing)
	<-ctx.Done()
	return s.Subscriber.Subscribe(ctx, topic)
}

func TestGoRunsUnderTheServiceLifecycle(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	t.Run("an error stops Run and is returned", func(t *testing.T) {
		router := newRouter(t)
		router.AddConsumerHandler("ship-order", "order-placed", newBroker(t, true), func(*message.Message) error { return nil })
		svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker), service.WithRouter(router))
		fail := make(chan struct{})
		svc.Go(func(ctx context.Context) error {
			select {
			case <-fail:
				return errors.New("listener closed")
			case <-ctx.Done():
				return nil
			}
		})
		errc := runAsync(context.Background(), svc)
		<-svc.Running()
		close(fail)
		require.EqualError(t, returned(t, errc), "listener closed")
		require.True(t, router.IsClosed(), "the router stopped with it")
		require.NoError(t, svc.Close())
	})
	t.Run("Close cancels its context", func(t *testing.T) {
		svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker))
		var started, stopped atomic.Bool
		svc.Go(func(ctx context.Context) error {
			started.Store(true)
			<-ctx.Done()
			stopped.Store(true)
			return nil
		})
		errc := runAsync(context.Background(), svc)
		<-svc.Running()
		require.Eventually(t, started.Load, time.Minute, time.Millisecond)
		require.NoError(t, svc.Close())
		require.NoError(t, returned(t, errc))
		require.True(t, stopped.Load())
	})
	t.Run("after Run, or nil, panics", func(t *testing.T) {
		svc := b.newService(t, config(t, relayYAML, b.schema))
		require.PanicsWithValue(t, "oncebox: service: Go: fn is nil", func() { svc.Go(nil) })
		errc := runAsync(context.Background(), svc)
		<-svc.Running()
		require.PanicsWithValue(t, "oncebox: service: Go called after Run", func() {
			svc.Go(func(context.Context) error { return nil })
		})
		require.NoError(t, svc.Close())
		require.NoError(t, returned(t, errc))
	})
}

func TestWithRouterNilIsAnError(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	_, err := service.New(b.Beginner, config(t, relayYAML, b.schema), nil, service.WithRouter(nil))
	require.ErrorContains(t, err, "WithRouter: the router is nil")
}

// The finding (issue 21, row 10): a Retry added under svc.Middleware (as a
// handler's own middleware) ran inside the inbox's transaction; the inbox now
// finds it and refuses the message, and the service stops with the error
// instead of holding every message of the router.
func TestAMisusedInboxStopsTheService(t *testing.T) {
	for _, tg := range dbtest.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			b := setup(t, tg)
			router := newRouter(t)
			svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(newBroker(t, false)), service.WithRouter(router))
			router.AddMiddleware(svc.Middleware)
			e := b.effects(func(run int) error {
				if run == 1 {
					return errors.New("the first attempt fails")
				}
				return nil
			})
			h := router.AddConsumerHandler("ship-order", "order-placed", b.broker, func(msg *message.Message) error { return e.handle(msg) })
			h.AddMiddleware(wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond}.Middleware)

			errc := runAsync(context.Background(), svc)
			<-svc.Running()
			msg, key := event(t)
			require.NoError(t, b.broker.Publish("order-placed", msg))
			err := returned(t, errc)
			require.ErrorIs(t, err, middleware.ErrRetryInsideInbox)
			require.Zero(t, e.count(t, key), "no effect commits with Retry inside the inbox")
		})
	}
}
