package rediscache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache/rediscache"
	"github.com/oncebox/watermill-oncebox/internal/tcpproxy"
)

// functionalTimeout is the cache Timeout of the tests that are not about
// timeouts: generous, so that a loaded CI machine (several -race test binaries
// at once) does not turn a slow answer into a failure. The default 100ms is
// exercised by TestStalledRedisIsBoundedByTimeout.
const functionalTimeout = 5 * time.Second

// newCache returns a cache over the real Redis under a fresh name, the raw
// client (for looking at the keys) and the name.
func newCache(t *testing.T, ttl time.Duration) (*rediscache.Cache, *redis.Client, string) {
	t.Helper()
	raw := rawClient(t)
	name := uniqueName(t, raw)
	c, err := rediscache.New(raw, rediscache.Config{Name: name, TTL: ttl, Timeout: functionalTimeout})
	require.NoError(t, err)
	return c, raw, name
}

func TestAddThenContains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _, _ := newCache(t, time.Hour)

	hit, err := c.Contains(ctx, "e1")
	require.NoError(t, err)
	require.False(t, hit, "an unknown key misses, without error")

	require.NoError(t, c.Add(ctx, "e1"))
	hit, err = c.Contains(ctx, "e1")
	require.NoError(t, err)
	require.True(t, hit)

	hit, err = c.Contains(ctx, "e2")
	require.NoError(t, err)
	require.False(t, hit)

	require.NoError(t, c.Add(ctx, "e1"), "adding twice is fine")
	hit, err = c.Contains(ctx, "e1")
	require.NoError(t, err)
	require.True(t, hit)
}

func TestKeysArePrefixedWithTheNameAndExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 10 * time.Minute
	c, raw, name := newCache(t, ttl)

	require.NoError(t, c.Add(ctx, "e1"))
	require.Equal(t, name+":e1", c.Key("e1"))

	v, err := raw.Get(ctx, name+":e1").Result()
	require.NoError(t, err, "stored as Name:key")
	require.Equal(t, "1", v)
	pttl, err := raw.PTTL(ctx, name+":e1").Result()
	require.NoError(t, err)
	require.Greater(t, pttl, time.Duration(0), "the key has a ttl")
	require.LessOrEqual(t, pttl, ttl)
	require.Greater(t, pttl, ttl-time.Minute, "the ttl is the configured one")

	n, err := raw.Exists(ctx, "e1").Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing stored under the bare key")

	// A key stored by someone else under the prefixed name is seen: the name
	// is the whole namespace.
	require.NoError(t, raw.Set(ctx, name+":e2", "x", time.Minute).Err())
	hit, err := c.Contains(ctx, "e2")
	require.NoError(t, err)
	require.True(t, hit)
}

func TestCachesWithDifferentNamesAreApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := rawClient(t)
	orders, err := rediscache.New(raw, rediscache.Config{Name: uniqueName(t, raw), TTL: time.Hour, Timeout: functionalTimeout})
	require.NoError(t, err)
	billing, err := rediscache.New(raw, rediscache.Config{Name: uniqueName(t, raw), TTL: time.Hour, Timeout: functionalTimeout})
	require.NoError(t, err)

	require.NoError(t, orders.Add(ctx, "e1"))
	require.NoError(t, billing.Add(ctx, "e2"))

	for _, tc := range []struct {
		c    *rediscache.Cache
		key  string
		want bool
	}{
		{orders, "e1", true}, {orders, "e2", false},
		{billing, "e1", false}, {billing, "e2", true},
	} {
		hit, err := tc.c.Contains(ctx, tc.key)
		require.NoError(t, err)
		require.Equal(t, tc.want, hit, "%s %s", tc.c.Key(""), tc.key)
	}
}

func TestEntriesExpireAfterTheirTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 100ms works because Add always uses SET … PX (milliseconds); with EX the
	// shortest ttl would be a second.
	const ttl = 100 * time.Millisecond
	c, raw, name := newCache(t, ttl)

	added := time.Now()
	require.NoError(t, c.Add(ctx, "e1"))
	pttl, err := raw.PTTL(ctx, name+":e1").Result()
	require.NoError(t, err)
	if time.Since(added) < ttl/2 { // the key may already be gone on a loaded machine
		require.Greater(t, pttl, time.Duration(0))
		require.LessOrEqual(t, pttl, ttl)
	}

	require.Eventually(t, func() bool {
		hit, err := c.Contains(ctx, "e1")
		return err == nil && !hit
	}, 3*time.Second, 10*time.Millisecond, "the entry expires")
	require.GreaterOrEqual(t, time.Since(added), ttl-5*time.Millisecond, "not (much) before its ttl")

	// Adding again renews it.
	require.NoError(t, c.Add(ctx, "e1"))
	require.Eventually(t, func() bool {
		hit, err := c.Contains(ctx, "e1")
		return err == nil && !hit
	}, 3*time.Second, 10*time.Millisecond)
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _, _ := newCache(t, time.Minute)

	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				key := fmt.Sprintf("g%d-%d", g, i)
				if err := c.Add(ctx, key); err != nil {
					errs <- err
					continue
				}
				if hit, err := c.Contains(ctx, key); err != nil || !hit {
					errs <- fmt.Errorf("%s: hit %v, err %v", key, hit, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCancelledContextIsAnError(t *testing.T) {
	t.Parallel()
	c, _, name := newCache(t, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	hit, err := c.Contains(ctx, "e1")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "oncebox: redis cache "+name+": contains")
	require.False(t, hit)
	require.ErrorIs(t, c.Add(ctx, "e1"), context.Canceled)
}

// TestRedisStoppedMidTest cuts the connection to Redis under a working cache,
// through a proxy (the machine's Redis keeps running for the other tests):
// every call then fails promptly with an error, nothing panics, and the cache
// works again once Redis is reachable again.
func TestRedisStoppedMidTest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := rawClient(t)
	name := uniqueName(t, raw)
	p := tcpproxy.Start(t, "127.0.0.1:0", redisAddr())
	addr := p.Addr()

	client := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   -1, // no retries: fail fast
	})
	t.Cleanup(func() { _ = client.Close() })
	c, err := rediscache.New(client, rediscache.Config{Name: name, TTL: time.Minute, Timeout: 1500 * time.Millisecond})
	require.NoError(t, err)

	require.NoError(t, c.Add(ctx, "before"))
	hit, err := c.Contains(ctx, "before")
	require.NoError(t, err)
	require.True(t, hit, "works through the proxy")

	p.Kill() // Redis is gone: pooled connections drop, new dials are refused

	for i := range 3 { // the pooled connection, then fresh dials
		var (
			hit bool
			err error
		)
		d := elapsed(func() {
			require.NotPanics(t, func() { hit, err = c.Contains(ctx, "before") })
		})
		require.Error(t, err, "Contains #%d after the kill", i)
		require.False(t, hit)
		require.ErrorContains(t, err, "oncebox: redis cache "+name+": contains")
		t.Logf("Contains #%d after the kill: %v (%s)", i, err, d)
		require.Less(t, d, 2*time.Second, "Contains #%d returns promptly", i)

		d = elapsed(func() {
			require.NotPanics(t, func() { err = c.Add(ctx, fmt.Sprintf("during-%d", i)) })
		})
		require.Error(t, err, "Add #%d after the kill", i)
		require.ErrorContains(t, err, "oncebox: redis cache "+name+": add")
		require.Less(t, d, 2*time.Second, "Add #%d returns promptly", i)
	}

	// Redis back on the same address: the same cache recovers by itself.
	tcpproxy.Start(t, addr, redisAddr())
	require.Eventually(t, func() bool {
		hit, err := c.Contains(ctx, "before")
		return err == nil && hit
	}, 3*time.Second, 20*time.Millisecond, "the cache recovers")
	require.NoError(t, c.Add(ctx, "after"))
	n, err := raw.Exists(ctx, name+":during-0", name+":after").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the Add after the recovery is stored")
}

// TestStalledRedisIsBoundedByTimeout points the cache at a server that
// accepts and never answers. The client keeps go-redis's defaults
// (ReadTimeout 3s, 3 retries, context deadlines ignored on the socket), so
// only the cache's own Timeout bounds the calls.
func TestStalledRedisIsBoundedByTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := startStalled(t)
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close() }) // ends go-redis's abandoned reads

	for _, timeout := range []time.Duration{100 * time.Millisecond, 0 /* default 100ms */} {
		c, err := rediscache.New(client, rediscache.Config{Name: "stalled", TTL: time.Minute, Timeout: timeout})
		require.NoError(t, err)

		var hit bool
		d := elapsed(func() { hit, err = c.Contains(ctx, "e1") })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "oncebox: redis cache stalled: contains \"e1\": no answer within 100ms")
		require.False(t, hit)
		require.GreaterOrEqual(t, d, 90*time.Millisecond, "waits about Timeout")
		require.Less(t, d, time.Second, "and not much longer")

		d = elapsed(func() { err = c.Add(ctx, "e1") })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, d, time.Second)
	}

	// The caller's own deadline, when shorter, wins and is reported as such.
	c, err := rediscache.New(client, rediscache.Config{Name: "stalled", TTL: time.Minute, Timeout: time.Minute})
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	d := elapsed(func() { _, err = c.Contains(short, "e1") })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotContains(t, err.Error(), "no answer within")
	require.Less(t, d, time.Second)
}

func TestNewRefusesBadArguments(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: redisAddr()}) // no I/O until used
	t.Cleanup(func() { _ = client.Close() })
	good := rediscache.Config{Name: "orders", TTL: time.Hour}

	var typedNil *redis.Client
	for name, tc := range map[string]struct {
		client redis.UniversalClient
		cfg    rediscache.Config
		want   []string
	}{
		"nil client":       {nil, good, []string{"client is nil"}},
		"typed nil client": {typedNil, good, []string{"client is nil"}},
		"empty name":       {client, rediscache.Config{TTL: time.Hour}, []string{"Config.Name", "required"}},
		"long name":        {client, rediscache.Config{Name: strings.Repeat("n", 201), TTL: time.Hour}, []string{"Config.Name", "201 bytes"}},
		"space in name":    {client, rediscache.Config{Name: "my orders", TTL: time.Hour}, []string{"Config.Name", "whitespace"}},
		"tab in name":      {client, rediscache.Config{Name: "orders\t", TTL: time.Hour}, []string{"Config.Name", "whitespace"}},
		"newline in name":  {client, rediscache.Config{Name: "orders\n", TTL: time.Hour}, []string{"Config.Name"}},
		"control in name":  {client, rediscache.Config{Name: "ord\x00ers", TTL: time.Hour}, []string{"Config.Name", "control"}},
		"nbsp in name":     {client, rediscache.Config{Name: "ord\u00a0ers", TTL: time.Hour}, []string{"Config.Name"}},
		"invalid utf-8":    {client, rediscache.Config{Name: "ord\xffers", TTL: time.Hour}, []string{"Config.Name", "UTF-8"}},
		"zero ttl":         {client, rediscache.Config{Name: "orders"}, []string{"Config.TTL", "at least 1ms"}},
		"negative ttl":     {client, rediscache.Config{Name: "orders", TTL: -time.Second}, []string{"Config.TTL"}},
		"sub-ms ttl":       {client, rediscache.Config{Name: "orders", TTL: time.Microsecond}, []string{"Config.TTL"}},
		"negative timeout": {client, rediscache.Config{Name: "orders", TTL: time.Hour, Timeout: -1}, []string{"Config.Timeout"}},
		"everything":       {nil, rediscache.Config{Timeout: -1}, []string{"client is nil", "Config.Name", "Config.TTL", "Config.Timeout"}},
	} {
		c, err := rediscache.New(tc.client, tc.cfg)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
		for _, want := range tc.want {
			require.ErrorContains(t, err, want, name)
		}
		require.Nil(t, c, name)
	}

	for _, cfg := range []rediscache.Config{
		{Name: strings.Repeat("n", rediscache.MaxNameLength), TTL: rediscache.MinTTL},
		{Name: "orders:inbox/v2", TTL: time.Hour, Timeout: time.Second},
		{Name: "commandes-reçues", TTL: time.Hour},
	} {
		c, err := rediscache.New(client, cfg)
		require.NoError(t, err, "%+v", cfg)
		require.NotNil(t, c)
	}
}

func TestConfigValidateAgainstTheInboxTTL(t *testing.T) {
	t.Parallel()
	cfg := rediscache.Config{Name: "orders", TTL: 2 * time.Hour}

	err := cfg.Validate(time.Hour)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	var fe *oncebox.FieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "inbox.cache.ttl", fe.Field)
	require.ErrorContains(t, err, "oncebox: config inbox.cache.ttl: 2h0m0s")
	require.ErrorContains(t, err, "is longer than inbox.clean-up.ttl 1h0m0s")

	require.NoError(t, cfg.Validate(2*time.Hour), "equal is fine")
	require.NoError(t, cfg.Validate(24*time.Hour))
	require.NoError(t, cfg.Validate(0), "no inbox ttl: the relation is not checked")

	err = rediscache.Config{TTL: 2 * time.Hour}.Validate(time.Hour)
	require.ErrorContains(t, err, "Config.Name", "the fields are checked too")
	require.ErrorContains(t, err, "inbox.cache.ttl")
}
