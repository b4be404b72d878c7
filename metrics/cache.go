package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// cached is the last value of a collector's refresh: a scrape refreshes it
// when the last attempt, successful or not, is at least ttl old; a failed
// refresh counts in errors and keeps the last value. Concurrent scrapes
// share one refresh.
type cached[T any] struct {
	mu        sync.Mutex
	refreshed time.Time // last attempt, successful or not
	value     T
}

// get returns the value, refreshed by load first when it is due at now.
func (c *cached[T]) get(now time.Time, ttl time.Duration, errors prometheus.Counter, load func() (T, error)) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.refreshed.IsZero() && now.Sub(c.refreshed) < ttl {
		return c.value
	}
	c.refreshed = now
	v, err := load()
	if err != nil {
		errors.Inc()
		return c.value
	}
	c.value = v
	return v
}
