// Package dbexec repeats the batches of the background jobs.
package dbexec

import (
	"context"
)

// Repeat runs the operation step, one batch of at most limit rows at a time,
// until one batch touches fewer than limit rows or ctx ends, and returns the
// rows touched in all. Each batch is its own transaction, so a long clean-up
// never holds locks on more than limit rows at once.
func Repeat(ctx context.Context, limit int, step func(ctx context.Context) (int, error)) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := step(ctx)
		if err != nil {
			return total, err
		}
		total += n
		if n < limit {
			break
		}
	}
	return total, ctx.Err()
}
