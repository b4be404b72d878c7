package poller

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// conns is the relay's way to the database, shared by its stages: the
// pool, the dialect's relay role, and the Config.MaxConcurrentQueries
// slots that every statement but the keeper's holds one of while it runs.
type conns struct {
	db       wsql.Beginner
	d        dialects.Relay
	sem      chan struct{} // the slots; safe for every goroutine
	finalize time.Duration // Config.FinalizeTimeout
}

// with runs f while holding one of the MaxConcurrentQueries slots.
func (c *conns) with(ctx context.Context, f func() error) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	return f()
}

// finalizeCtx is the context of a statement that records the outcome of a
// batch: it must run even when the poller is closing, so it does not inherit
// cancellation, but it is bounded.
func (c *conns) finalizeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.finalize)
}
