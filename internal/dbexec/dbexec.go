// Package dbexec runs the statements of the background jobs.
package dbexec

import (
	"context"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// Repeat executes the statements next builds, one after another, until one
// touches fewer than limit rows or ctx ends, and returns the rows touched in
// all. Each statement is its own transaction, so a long clean-up never holds
// locks on more than limit rows at once.
func Repeat(ctx context.Context, db wsql.ContextExecutor, limit int, next func() dialects.Query) (int, error) {
	total := 0
	for ctx.Err() == nil {
		q := next()
		res, err := db.ExecContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(n)
		if int(n) < limit {
			break
		}
	}
	return total, ctx.Err()
}
