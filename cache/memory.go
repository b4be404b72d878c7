package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// MinMemoryTTL is the shortest ttl [NewMemory] accepts. The expiry goroutine
// of golang-lru's expirable cache ticks every ttl/100, so a shorter ttl would
// spin; no inbox wants entries that live less than a millisecond anyway.
const MinMemoryTTL = time.Millisecond

// Memory is an in-process [Cache]: a bounded LRU whose entries expire ttl
// after they were added, built on github.com/hashicorp/golang-lru/v2/expirable.
// It is safe for concurrent use.
//
// Each instance of a service has its own Memory, so a duplicate delivered to
// another instance misses and is caught by the inbox table; use
// cache/rediscache to share hits between instances.
//
// At the bound, adding a new key evicts the least recently used one (a
// successful Contains counts as a use). The inbox table stays the source of
// truth, so an eviction costs one database look-up, never a duplicate.
//
// Lifetime: the expirable cache of golang-lru v2.0.7 starts one goroutine per
// cache that deletes expired entries every ttl/100 and can never be stopped
// (the library has no Close). Build one Memory per service at start-up and
// keep it for the life of the process rather than one per handler or request.
// Tests that check for goroutine leaks must ignore the function
// "github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1".
type Memory struct {
	lru *expirable.LRU[string, struct{}]
}

var _ Cache = (*Memory)(nil)

// NewMemory returns a Memory holding at most size keys, each for ttl after
// it was last added. size must be > 0 and ttl at least [MinMemoryTTL]; ttl
// should be at most the inbox clean-up ttl, or the cache would answer for ids
// the inbox table has forgotten. Errors wrap oncebox.ErrInvalidConfig and name
// the argument.
func NewMemory(size int, ttl time.Duration) (*Memory, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: memory cache: size must be > 0, got %d", oncebox.ErrInvalidConfig, size)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: memory cache: ttl must be > 0, got %s", oncebox.ErrInvalidConfig, ttl)
	}
	if ttl < MinMemoryTTL {
		return nil, fmt.Errorf("%w: memory cache: ttl must be at least %s, got %s", oncebox.ErrInvalidConfig, MinMemoryTTL, ttl)
	}
	return &Memory{lru: expirable.NewLRU[string, struct{}](size, nil, ttl)}, nil
}

// Contains reports whether key was added less than ttl ago and has not been
// evicted since; a hit makes key the most recently used. It never fails: the
// error is always nil, and ctx is not used (the look-up is a map access under
// a mutex, nothing to cancel).
func (m *Memory) Contains(_ context.Context, key string) (bool, error) {
	// Get, not the library's Contains: Get checks the entry's expiry, while
	// Contains answers true for an expired entry until the background
	// goroutine has deleted it.
	_, ok := m.lru.Get(key)
	return ok, nil
}

// Add records key for ttl from now (adding a key again renews its ttl) and
// makes it the most recently used. When the cache is full, the least recently
// used key is evicted. It never fails: the error is always nil, and ctx is not
// used.
func (m *Memory) Add(_ context.Context, key string) error {
	m.lru.Add(key, struct{}{})
	return nil
}

// Len returns the number of keys held, including expired keys that the
// background goroutine has not deleted yet (it deletes them within about
// ttl/100 of their expiry). For tests and metrics.
func (m *Memory) Len() int {
	return m.lru.Len()
}
