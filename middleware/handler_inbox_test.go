package middleware_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// effectLog counts each handler's runs per event id: the handlers write no
// effect of their own in the database, so the count is the effect.
type effectLog struct {
	mu   sync.Mutex
	runs map[string]int // handler + "/" + event id -> committed runs
	fail map[string]int // handler + "/" + event id -> failures still to inject
}

func (l *effectLog) handler(name string) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		k := name + "/" + msg.Metadata.Get(oncebox.HeaderEventID)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.fail[k] > 0 {
			l.fail[k]--
			return fmt.Errorf("%s: injected failure", k) // rolled back, nacked, redelivered
		}
		l.runs[k]++
		return nil
	}
}

// deliverAs runs msg through in and h under a router handler called name,
// and returns once the router acked it.
func deliverAs(t *testing.T, in *middleware.Inbox, name string, h message.NoPublishHandlerFunc, msg *message.Message) {
	t.Helper()
	pubSub := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	defer func() { _ = pubSub.Close() }()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	router.AddMiddleware(in.Middleware)
	router.AddConsumerHandler(name, "orders", pubSub, h)
	done := make(chan error, 1)
	go func() { done <- router.Run(context.Background()) }()
	<-router.Running()
	require.NoError(t, pubSub.Publish("orders", msg))
	require.NoError(t, router.Close())
	require.NoError(t, <-done)
}

func (l *effectLog) count(handler, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[handler+"/"+key]
}

// Two handlers on one topic behind one inbox (the router-wide middleware):
// each handles every event once, whatever the duplicates and the
// redeliveries, because the inbox records (handler name, event id).
func TestTwoHandlersOnOneTopicEachHandleEveryEventOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		env := tg.New(t)
		in, err := middleware.NewInbox(env.Beginner, middleware.InboxConfig{Dialect: env.Dialect}, watermill.NopLogger{})
		require.NoError(t, err)
		router, pubSub := newRouter(t)
		router.AddMiddleware(in.Middleware)
		log := &effectLog{runs: map[string]int{}, fail: map[string]int{}}
		router.AddConsumerHandler("ship", "orders", pubSub, log.handler("ship"))
		router.AddConsumerHandler("email", "orders", pubSub, log.handler("email"))
		runRouter(t, router)

		keys := make([]string, 5)
		for i := range keys {
			keys[i] = newKey(t)
		}
		// The first handling of keys[0] by ship and of keys[1] by email fails
		// once: the nack redelivers it to that handler only.
		log.mu.Lock()
		log.fail["ship/"+keys[0]], log.fail["email/"+keys[1]] = 1, 1
		log.mu.Unlock()
		for round := range 3 { // every event three times: two duplicates each
			for _, k := range keys {
				require.NoError(t, pubSub.Publish("orders", event(k)), "round %d", round)
			}
		}
		require.Eventually(t, func() bool {
			for _, k := range keys {
				if log.count("ship", k) != 1 || log.count("email", k) != 1 {
					return false
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond, "each handler handles each event")
		dbtest.Never(t, func() bool {
			for _, k := range keys {
				if log.count("ship", k) > 1 || log.count("email", k) > 1 {
					return true
				}
			}
			return false
		}, 200*time.Millisecond, "an event handled twice by one handler")
		for _, h := range []string{"ship", "email"} {
			require.Equal(t, len(keys), env.Count(t, env.Tables.Inbox, "consumer = "+env.P(1), h), "recorded under %s", h)
		}
	})
}

// An explicit namespace for one handler (a rename: the new name keeps the
// old name's ids) overrides its name; the other handler keeps its own.
func TestHandlerNamespacesKeepARenamedHandlersIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := newKey(t)
	in := b.inbox(t)
	log := &effectLog{runs: map[string]int{}, fail: map[string]int{}}
	deliverAs(t, in, "ship", log.handler("old"), event(key))
	require.Equal(t, 1, log.count("old", key))

	renamed := b.inbox(t, func(cfg *middleware.InboxConfig) {
		cfg.HandlerNamespaces = map[string]string{"ship-orders": "ship"}
	})
	deliverAs(t, renamed, "ship-orders", log.handler("new"), event(key))
	require.Zero(t, log.count("new", key), "the renamed handler finds the old name's id")

	deliverAs(t, renamed, "email", log.handler("email"), event(key))
	require.Equal(t, 1, log.count("email", key), "another handler keeps its own namespace")
}

// Ids recorded before the upgrade are under "": pinning a handler (or every
// handler, SharedNamespace) to "" keeps deduplicating against them.
func TestNamespacePinnedToTheEmptyOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := newKey(t)
	// Recorded by the previous version: namespace "".
	_, err := b.inbox(t).Middleware(func(*message.Message) ([]*message.Message, error) { return nil, nil })(event(key))
	require.NoError(t, err)
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().Inbox, "consumer = ''"))

	log := &effectLog{runs: map[string]int{}, fail: map[string]int{}}
	for name, mutate := range map[string]func(*middleware.InboxConfig){
		"per handler": func(cfg *middleware.InboxConfig) { cfg.HandlerNamespaces = map[string]string{"ship": ""} },
		"shared":      func(cfg *middleware.InboxConfig) { cfg.SharedNamespace = true },
	} {
		deliverAs(t, b.inbox(t, mutate), "ship", log.handler(name), event(key))
		require.Zero(t, log.count(name, key), "%s: the id recorded under '' is found", name)
	}
	deliverAs(t, b.inbox(t), "ship", log.handler("default"), event(key))
	require.Equal(t, 1, log.count("default", key), "by default the handler has its own namespace")
}

// The cache keys follow the handler's namespace: what ship handled is a
// cache hit for ship only, and email, asked after it, still handles the
// event; a duplicate for either is then a cache hit.
func TestTheCacheKeysAreThoseOfTheHandlersNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mem, err := cache.NewMemory(100, time.Hour)
	require.NoError(t, err)
	hits := &cacheHits{}
	in := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Cache, cfg.Hooks = mem, hits })
	log := &effectLog{runs: map[string]int{}, fail: map[string]int{}}
	key := newKey(t)
	for _, name := range []string{"ship", "email", "ship", "email"} {
		deliverAs(t, in, name, log.handler(name), event(key))
	}
	require.Equal(t, 1, log.count("ship", key))
	require.Equal(t, 1, log.count("email", key), "ship's cache entry is not email's")
	require.Equal(t, map[string]int{"ship": 1, "email": 1}, hits.byNamespace(), "each duplicate a cache hit in its namespace")
}

type cacheHits struct {
	middleware.NopInboxHooks
	mu   sync.Mutex
	hits map[string]int
}

func (h *cacheHits) Duplicate(ns string, cached bool) {
	if !cached {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hits == nil {
		h.hits = map[string]int{}
	}
	h.hits[ns]++
}

func (h *cacheHits) byNamespace() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits
}
