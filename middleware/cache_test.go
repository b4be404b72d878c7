package middleware_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// cacheHooks counts what the inbox reports about the cache.
type cacheHooks struct {
	middleware.NopInboxHooks
	mu          sync.Mutex
	hits        int
	cacheErrors int
}

func (h *cacheHooks) Duplicate(_ string, cached bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cached {
		h.hits++
	}
}

func (h *cacheHooks) CacheError(error) { h.mu.Lock(); h.cacheErrors++; h.mu.Unlock() }

func (h *cacheHooks) counts() (hits, cacheErrors int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits, h.cacheErrors
}

func TestCacheHitIssuesNoSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mem, err := cache.NewMemory(1000, time.Hour)
	require.NoError(t, err)
	hooks := &cacheHooks{}
	c := newCounter()
	h := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Cache, cfg.Hooks = mem, hooks }).Middleware(c.handle(t, b))
	key := newKey(t)

	_, err = h(event(key)) // a miss: the table decides, then the cache learns
	require.NoError(t, err)
	b.trace.Reset()
	_, err = h(event(key))
	require.NoError(t, err)
	require.Empty(t, b.trace.Statements(), "a cache hit touches no database")
	require.Equal(t, 1, c.count(key))
	hits, _ := hooks.counts()
	require.Equal(t, 1, hits)
}

func TestCacheLearnsOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mem, err := cache.NewMemory(1000, time.Hour)
	require.NoError(t, err)
	c := newCounter()
	c.fail = func(string, int) error { return errors.New("boom") }
	h := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Cache = mem }).Middleware(c.handle(t, b))
	key := newKey(t)
	_, err = h(event(key))
	require.Error(t, err)
	hit, err := mem.Contains(context.Background(), key)
	require.NoError(t, err)
	require.False(t, hit, "a failed handler never marks the event processed in the cache")
	c.fail = nil
	_, err = h(event(key))
	require.NoError(t, err, "so the redelivery runs")
	require.Equal(t, 2, c.count(key))
}

// The cache key of a namespace cannot be mistaken for another namespace's:
// namespace "" with key "billing/K" and namespace "billing" with key "K"
// are two events, and the second is handled (it used to be skipped as a
// duplicate: both were cached as "billing/K").
func TestCacheKeysOfNamespacesNeverCollide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mem, err := cache.NewMemory(1000, time.Hour)
	require.NoError(t, err)
	c := newCounter()
	inNamespace := func(ns string) func(*middleware.InboxConfig) {
		return func(cfg *middleware.InboxConfig) {
			cfg.Cache, cfg.Namespace = mem, ns
		}
	}
	plain := b.inbox(t, inNamespace("")).Middleware(c.handle(t, b))
	billing := b.inbox(t, inNamespace("billing")).Middleware(c.handle(t, b))
	_, err = plain(event("billing/K"))
	require.NoError(t, err)
	_, err = billing(event("K"))
	require.NoError(t, err)
	require.Equal(t, 1, c.count("billing/K"))
	require.Equal(t, 1, c.count("K"), "namespace billing's K is its own event")
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().Inbox, "consumer = 'billing'"), "and has its inbox row")
}
