package rediscache_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache/rediscache"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/tcpproxy"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// inboxHooks counts the inbox's cache hits and cache errors.
type inboxHooks struct {
	middleware.NopInboxHooks
	hits, cacheErrors atomic.Int64
}

func (h *inboxHooks) Duplicate(_ string, cached bool) {
	if cached {
		h.hits.Add(1)
	}
}

func (h *inboxHooks) CacheError(error) { h.cacheErrors.Add(1) }

// TestRedisCacheLostMidTestStillCorrect puts the Redis cache in front of a
// real inbox (PostgreSQL) and kills Redis under it: a cache error never
// fails a message, and the inbox table still drops the duplicate and runs a
// new event once. (It lives in this module, not in middleware's tests, so
// that the core module does not require go-redis: docs/modules.md.)
func TestRedisCacheLostMidTestStillCorrect(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:0", redisAddr())
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	rc, err := rediscache.New(client, rediscache.Config{Name: uniqueName(t, rawClient(t)), TTL: time.Minute, Timeout: 2 * time.Second})
	require.NoError(t, err)
	hooks := &inboxHooks{}
	inbox, err := middleware.NewInbox(schema.Beginner, middleware.InboxConfig{Dialect: schema.Dialect, Cache: rc, Hooks: hooks},
		watermill.NopLogger{})
	require.NoError(t, err)
	runs := map[string]int{} // the handler runs one message at a time here
	h := inbox.Middleware(func(msg *message.Message) ([]*message.Message, error) {
		runs[msg.Metadata.Get(oncebox.HeaderEventID)]++
		return nil, nil
	})
	handle := func(key string) error {
		msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":"o-1"}`))
		msg.Metadata.Set(oncebox.HeaderEventID, key)
		_, err := h(msg)
		return err
	}
	newKey := func() string {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		return id.String()
	}

	before := newKey()
	require.NoError(t, handle(before))
	require.NoError(t, handle(before))
	require.EqualValues(t, 1, hooks.hits.Load(), "served by Redis")

	proxy.Kill() // Redis is gone
	after := newKey()
	for _, key := range []string{before, after, after} {
		require.NoError(t, handle(key), "a cache error never fails a message")
	}
	require.Equal(t, 1, runs[before], "the table still drops the duplicate")
	require.Equal(t, 1, runs[after], "and runs a new event once")
	require.Positive(t, hooks.cacheErrors.Load())
}
