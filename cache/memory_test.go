package cache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
)

func TestMain(m *testing.M) {
	// golang-lru v2.0.7's expirable cache starts one expiry goroutine per
	// cache that cannot be stopped (see cache.Memory); anything else leaking
	// still fails the run.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"))
}

func TestMemoryAddThenContains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := cache.NewMemory(10, time.Hour)
	require.NoError(t, err)

	hit, err := c.Contains(ctx, "orders:e1")
	require.NoError(t, err)
	require.False(t, hit, "an unknown key misses")

	require.NoError(t, c.Add(ctx, "orders:e1"))
	hit, err = c.Contains(ctx, "orders:e1")
	require.NoError(t, err)
	require.True(t, hit)

	hit, err = c.Contains(ctx, "orders:e2")
	require.NoError(t, err)
	require.False(t, hit, "another key still misses")

	require.NoError(t, c.Add(ctx, "orders:e1"), "adding twice is fine")
	require.Equal(t, 1, c.Len())
}

func TestMemoryIgnoresCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := cache.NewMemory(10, time.Hour)
	require.NoError(t, err)

	require.NoError(t, c.Add(ctx, "k"), "Add never fails")
	hit, err := c.Contains(ctx, "k")
	require.NoError(t, err, "Contains never fails")
	require.True(t, hit)
}

func TestMemoryExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 50 * time.Millisecond
	c, err := cache.NewMemory(10, ttl)
	require.NoError(t, err)

	added := time.Now()
	require.NoError(t, c.Add(ctx, "k"))
	hit, err := c.Contains(ctx, "k")
	require.NoError(t, err)
	// Under -race on a loaded machine the first look-up may come late; only
	// assert the hit when it is surely within the ttl.
	if time.Since(added) < ttl/2 {
		require.True(t, hit, "fresh entry")
	}

	require.Eventually(t, func() bool {
		hit, err := c.Contains(ctx, "k")
		return err == nil && !hit
	}, 2*time.Second, 5*time.Millisecond, "the entry expires after its ttl")
	require.GreaterOrEqual(t, time.Since(added), ttl, "not before its ttl")

	// The expiry goroutine deletes the expired entry too, freeing its slot.
	require.Eventually(t, func() bool { return c.Len() == 0 },
		2*time.Second, 5*time.Millisecond)

	// Adding again renews the key.
	require.NoError(t, c.Add(ctx, "k"))
	require.Eventually(t, func() bool {
		hit, _ := c.Contains(ctx, "k")
		return !hit
	}, 2*time.Second, 5*time.Millisecond)
}

func TestMemoryEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := cache.NewMemory(2, time.Hour)
	require.NoError(t, err)

	require.NoError(t, c.Add(ctx, "a"))
	require.NoError(t, c.Add(ctx, "b"))
	require.NoError(t, c.Add(ctx, "c")) // "a" is the least recently used
	require.Equal(t, 2, c.Len())
	for key, want := range map[string]bool{"a": false, "b": true, "c": true} {
		hit, err := c.Contains(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, hit, key)
	}

	// A hit is a use: after touching "b", adding "d" evicts "c", not "b".
	c2, err := cache.NewMemory(2, time.Hour)
	require.NoError(t, err)
	require.NoError(t, c2.Add(ctx, "b"))
	require.NoError(t, c2.Add(ctx, "c"))
	hit, err := c2.Contains(ctx, "b")
	require.NoError(t, err)
	require.True(t, hit)
	require.NoError(t, c2.Add(ctx, "d"))
	for key, want := range map[string]bool{"b": true, "c": false, "d": true} {
		hit, err := c2.Contains(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, hit, key)
	}
}

func TestMemoryConcurrentUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := cache.NewMemory(100, time.Hour)
	require.NoError(t, err)

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				key := fmt.Sprintf("%d-%d", g, i%150)
				_ = c.Add(ctx, key)
				_, _ = c.Contains(ctx, key)
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, c.Len(), 100, "never above the bound")
}

func TestNewMemoryRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		size int
		ttl  time.Duration
		want string
	}{
		"zero size":     {0, time.Hour, "size"},
		"negative size": {-1, time.Hour, "size"},
		"zero ttl":      {10, 0, "ttl"},
		"negative ttl":  {10, -time.Second, "ttl"},
		"sub-ms ttl":    {10, time.Microsecond, "ttl"},
	} {
		c, err := cache.NewMemory(tc.size, tc.ttl)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
		require.ErrorContains(t, err, tc.want, name)
		require.Nil(t, c, name)
	}
	c, err := cache.NewMemory(1, cache.MinMemoryTTL)
	require.NoError(t, err, "the bounds themselves are accepted")
	require.NotNil(t, c)
}
