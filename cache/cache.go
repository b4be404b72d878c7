// Package cache is the optional cache in front of the inbox table.
//
// The inbox asks the cache first: a hit means "already processed" and the
// message is acked without touching the database. A miss goes to the inbox
// table as usual; only after the handler succeeded and its transaction
// committed is the id added to the cache, so the cache never declares
// processed an event that was not. The cache is an accelerator: a lost entry
// costs one database look-up, and a cache error never fails a message (the
// inbox falls back to the table and logs).
//
// Two implementations: [NewMemory] (in-process, bounded, expiring) and
// cache/rediscache (Redis, shared by the instances of one service). Any other
// cache fits by implementing [Cache].
package cache

import "context"

// Cache remembers processed inbox keys. Keys are opaque strings made by the
// inbox from the consumer namespace and the event id; implementations must
// keep the keys of different services apart (the Redis cache prefixes them
// with the service's cache name). Entry lifetime is the cache's own
// configuration and must not exceed the inbox clean-up ttl. Implementations
// are safe for concurrent use.
type Cache interface {
	// Contains reports whether key was added and has not expired.
	Contains(ctx context.Context, key string) (bool, error)
	// Add records key as processed.
	Add(ctx context.Context, key string) error
}
