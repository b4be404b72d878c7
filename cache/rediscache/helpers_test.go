package rediscache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// redisAddr is the Redis the tests use: ONCEBOX_TEST_REDIS_ADDR, else the
// machine's Redis on 127.0.0.1:6379.
func redisAddr() string {
	if addr := os.Getenv("ONCEBOX_TEST_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// rawClient returns a client of the real Redis, closed at the end of the test.
// An unreachable Redis fails the test: these tests are never skipped.
func rawClient(t *testing.T) *redis.Client {
	t.Helper()
	addr := redisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis is not reachable at %s: %v\n"+
			"Start it with:\n"+
			"  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log\n"+
			"or point ONCEBOX_TEST_REDIS_ADDR at a running Redis.", addr, err)
	}
	return c
}

// uniqueName returns a cache name no other test uses and deletes every key
// under it at the end of the test (registered after rawClient's Close, so it
// runs first).
func uniqueName(t *testing.T, raw *redis.Client) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "oncebox-test-" + hex.EncodeToString(b)
	t.Cleanup(func() { deleteKeys(t, raw, name+":*") })
	return name
}

func deleteKeys(t *testing.T, raw *redis.Client, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := raw.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			t.Errorf("clean-up: SCAN %s: %v", pattern, err)
			return
		}
		if len(keys) > 0 {
			if err := raw.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("clean-up: DEL: %v", err)
				return
			}
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// startStalled returns the address of a server that accepts connections and
// never answers (nor reads), like a Redis stuck in a long command or behind a
// broken network path. Its connections are closed at the end of the test.
func startStalled(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// elapsed runs fn and returns how long it took.
func elapsed(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}
