package pgtest

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// StatementCounter is a pgx.QueryTracer that records the SQL text of every
// statement sent by the pool it is installed on.
type StatementCounter struct {
	mu  sync.Mutex
	sql []string
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.sql = append(c.sql, data.SQL)
	c.mu.Unlock()
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Reset forgets the statements recorded so far.
func (c *StatementCounter) Reset() {
	c.mu.Lock()
	c.sql = nil
	c.mu.Unlock()
}

// Statements returns the statements recorded since the last Reset.
func (c *StatementCounter) Statements() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sql...)
}
