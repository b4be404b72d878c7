// Package rediscache is a Redis implementation of the inbox cache
// (cache.Cache), shared by every instance of one service.
//
// Each inbox key is stored as the Redis key Name + ":" + key with the value
// "1" and a time to live (SET … PX). Contains is one EXISTS, Add is one SET;
// each call is bounded by Config.Timeout so that a slow, stalled or dead Redis
// costs at most that long per message before the inbox falls back to its
// table.
package rediscache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
)

const (
	// DefaultTimeout bounds each Redis call when Config.Timeout is 0.
	DefaultTimeout = 100 * time.Millisecond
	// MaxNameLength is the longest Config.Name accepted, in bytes.
	MaxNameLength = 200
	// MinTTL is the shortest Config.TTL accepted: Redis expires keys in
	// milliseconds (SET … PX).
	MinTTL = time.Millisecond
)

// Config configures a [Cache].
type Config struct {
	// Name is the service's cache name (inbox.cache.cache-name): every key is
	// stored as Name + ":" + key. It must be unique per service, or two
	// services sharing the Redis would mark each other's events as seen.
	// Required; at most 200 bytes of valid UTF-8 without whitespace or control
	// characters.
	Name string
	// TTL is the lifetime of an entry (inbox.cache.ttl), at least 1ms and
	// rounded down to the millisecond. It must be at most the inbox clean-up
	// ttl (inbox.clean-up.ttl), or the cache would answer for ids the inbox
	// table has forgotten; the inbox checks that relation, and so does
	// [Config.Validate] when given the inbox ttl.
	TTL time.Duration
	// Timeout bounds each Redis call (one round trip, plus waiting for a
	// pooled connection or, on a cold pool, dialing one, which go-redis
	// follows with HELLO and CLIENT SETINFO). Default 100ms ([DefaultTimeout]).
	// When it passes, the call returns an error and the inbox falls back to
	// its table: a stalled Redis never stalls message handling for longer.
	Timeout time.Duration
}

// Validate checks c and, when inboxTTL > 0, that c.TTL is at most inboxTTL,
// the inbox clean-up ttl (inbox.clean-up.ttl). It returns every problem found,
// each wrapping oncebox.ErrInvalidConfig; the ttl relation is reported as an
// *oncebox.FieldError on "inbox.cache.ttl", like the root config's check.
// [New] checks the same fields but not the relation, which it cannot know.
func (c Config) Validate(inboxTTL time.Duration) error {
	errs := []error{c.validate()}
	if inboxTTL > 0 && c.TTL > inboxTTL {
		errs = append(errs, &oncebox.FieldError{
			Field: "inbox.cache.ttl",
			Message: fmt.Sprintf("%s (redis cache %q) is longer than inbox.clean-up.ttl %s: the cache would answer for ids the inbox table has forgotten",
				c.TTL, c.Name, inboxTTL),
		})
	}
	return errors.Join(errs...)
}

func (c Config) validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: redis cache: "+format, append([]any{oncebox.ErrInvalidConfig}, args...)...))
	}
	if err := validateName(c.Name); err != "" {
		add("Config.Name (inbox.cache.cache-name) %s", err)
	}
	if c.TTL < MinTTL {
		add("Config.TTL (inbox.cache.ttl) must be at least %s (Redis expires keys in milliseconds), got %s", MinTTL, c.TTL)
	}
	if c.Timeout < 0 {
		add("Config.Timeout must be > 0 (0: the default %s), got %s", DefaultTimeout, c.Timeout)
	}
	return errors.Join(errs...)
}

func validateName(name string) string {
	switch {
	case name == "":
		return "is required, and must be unique per service"
	case len(name) > MaxNameLength:
		return fmt.Sprintf("is %d bytes long, at most %d allowed", len(name), MaxNameLength)
	case !utf8.ValidString(name):
		return fmt.Sprintf("%q is not valid UTF-8", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Sprintf("%q contains whitespace or a control character (%U)", name, r)
		}
	}
	return ""
}

// Cache is a [cache.Cache] in Redis. It is safe for concurrent use; it does not
// own the client, which the caller closes after the last use of the Cache.
type Cache struct {
	client  redis.UniversalClient
	name    string
	prefix  string
	ttl     time.Duration
	timeout time.Duration
}

var _ cache.Cache = (*Cache)(nil)

// New returns a Cache storing its keys through client (a *redis.Client,
// *redis.ClusterClient, *redis.Ring or anything else implementing
// redis.UniversalClient) under cfg.Name. A nil client or an invalid cfg is an
// error wrapping oncebox.ErrInvalidConfig that names the argument. New does no
// I/O: an unreachable Redis shows up as errors of Contains and Add.
//
// Timeout is enforced by the Cache whatever the client's options: the call
// runs on its own goroutine and the Cache stops waiting for it after Timeout.
// With the client's default options (ContextTimeoutEnabled false, ReadTimeout
// 3s, MaxRetries 3) go-redis ignores context deadlines on the socket, so an
// abandoned call may hold a pooled connection up to its ReadTimeout (times its
// retries) after the Cache has returned; set ContextTimeoutEnabled: true (or a
// short ReadTimeout) to release it at Timeout too.
func New(client redis.UniversalClient, cfg Config) (*Cache, error) {
	var errs []error
	if isNil(client) {
		errs = append(errs, fmt.Errorf("%w: redis cache: client is nil", oncebox.ErrInvalidConfig))
	}
	errs = append(errs, cfg.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Cache{
		client:  client,
		name:    cfg.Name,
		prefix:  cfg.Name + ":",
		ttl:     cfg.TTL,
		timeout: cfg.Timeout,
	}, nil
}

// isNil reports a nil interface and a typed nil pointer in one (a nil
// *redis.Client would panic at the first call).
func isNil(client redis.UniversalClient) bool {
	if client == nil {
		return true
	}
	v := reflect.ValueOf(client)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Key returns the Redis key under which key is stored: Name + ":" + key.
func (c *Cache) Key(key string) string { return c.prefix + key }

// Contains reports whether key was added less than TTL ago, with one EXISTS.
// (false, nil) is a miss; any failure (Redis down or stalled past Timeout,
// ctx cancelled, an error reply) is (false, err) with err wrapping the cause
// (context.DeadlineExceeded for a timeout), which the inbox treats as a miss.
func (c *Cache) Contains(ctx context.Context, key string) (bool, error) {
	return call(ctx, c, "contains", key, func(ctx context.Context) (bool, error) {
		n, err := c.client.Exists(ctx, c.prefix+key).Result()
		return n > 0, err
	})
}

// Add records key for TTL from now (adding it again renews the TTL), with one
// SET Name:key "1" PX ttl. An error wraps the cause; the key may or may not
// have been stored (a timed-out SET can still land).
func (c *Cache) Add(ctx context.Context, key string) error {
	_, err := call(ctx, c, "add", key, func(ctx context.Context) (struct{}, error) {
		// Always PX, in milliseconds: go-redis's Set would pick EX for a
		// whole number of seconds and PX otherwise; one spelling keeps the
		// stored ttl exact to the millisecond, so that a short TTL (100ms in
		// the tests) works, where EX would round it to seconds.
		cmd := redis.NewStatusCmd(ctx, "set", c.prefix+key, "1", "px", c.ttl.Milliseconds())
		return struct{}{}, c.client.Process(ctx, cmd)
	})
	return err
}

// call runs fn under a context bounded by c.timeout and returns when fn does
// or when that context is done, whichever comes first. fn runs on its own
// goroutine because go-redis does not always honour context deadlines on the
// socket (see New); the goroutine ends when go-redis gives up, and a panic in
// it (a client hook, say) comes back as an error instead of crashing the
// service.
func call[T any](ctx context.Context, c *Cache, op, key string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, c.wrap(op, key, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned goroutine never blocks
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("panic: %v", r)}
			}
		}()
		v, err := fn(callCtx)
		done <- result{v: v, err: err}
	}()

	finish := func(r result) (T, error) {
		if r.err != nil {
			if ctx.Err() == nil && errors.Is(r.err, context.DeadlineExceeded) {
				return zero, c.timedOut(op, key)
			}
			return zero, c.wrap(op, key, r.err)
		}
		return r.v, nil
	}
	select {
	case r := <-done:
		return finish(r)
	case <-callCtx.Done():
		select {
		case r := <-done: // the answer came as the time ran out: use it
			return finish(r)
		default:
		}
		if err := ctx.Err(); err != nil {
			return zero, c.wrap(op, key, err) // the caller's context ended
		}
		return zero, c.timedOut(op, key)
	}
}

func (c *Cache) wrap(op, key string, err error) error {
	return fmt.Errorf("oncebox: redis cache %s: %s %q: %w", c.name, op, key, err)
}

func (c *Cache) timedOut(op, key string) error {
	return c.wrap(op, key, fmt.Errorf("no answer within %s: %w", c.timeout, context.DeadlineExceeded))
}
