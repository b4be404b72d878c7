package middleware_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestMain(m *testing.M) {
	// golang-lru's expirable cache runs one expiry goroutine per cache for
	// the life of the process.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"))
}

type bundle struct {
	schema *pgtest.Schema
	trace  *pgtest.StatementCounter
}

func setup(t *testing.T) *bundle {
	t.Helper()
	trace := &pgtest.StatementCounter{}
	s := pgtest.NewSchema(t, pgtest.WithTracer(trace))
	_, err := s.Pool.Exec(context.Background(), "CREATE TABLE "+s.Name+".effects (event_id text, note text)")
	require.NoError(t, err)
	return &bundle{schema: s, trace: trace}
}

func (b *bundle) inbox(t *testing.T, mutate ...func(*middleware.InboxConfig)) *middleware.Inbox {
	t.Helper()
	cfg := middleware.InboxConfig{Dialect: b.schema.Dialect}
	for _, m := range mutate {
		m(&cfg)
	}
	in, err := middleware.NewInbox(b.schema.Beginner, cfg, watermill.NopLogger{})
	require.NoError(t, err)
	return in
}

// event returns a message carrying the oncebox event id key.
func event(key string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":"o-1"}`))
	msg.Metadata.Set(oncebox.HeaderEventID, key)
	return msg
}

func newKey(t *testing.T) string {
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	return id.String()
}

// counter is a handler that counts its runs and writes one effect row in the
// inbox's transaction when it has one.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
	fail func(key string, run int) error
}

func newCounter() *counter { return &counter{runs: map[string]int{}} }

func (c *counter) handle(t *testing.T, b *bundle) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		key := msg.Metadata.Get(oncebox.HeaderEventID)
		c.mu.Lock()
		c.runs[key]++
		run := c.runs[key]
		c.mu.Unlock()
		if tx, ok := middleware.PgxTxFromContext(msg.Context()); ok {
			if _, err := tx.Exec(msg.Context(), "INSERT INTO "+b.schema.Name+".effects VALUES ($1, 'done')", key); err != nil {
				return nil, err
			}
		}
		if c.fail != nil {
			if err := c.fail(key, run); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[key]
}

func (b *bundle) effects(t *testing.T, key string) int {
	return b.schema.Count(t, b.schema.Name+".effects", "event_id = $1", key)
}

func (b *bundle) recorded(t *testing.T, key string) int {
	return b.schema.Count(t, b.schema.Dialect.Tables().Inbox, "event_id = $1", key)
}

// capture returns a logger recording what is logged.
func capture() *watermill.CaptureLoggerAdapter { return watermill.NewCaptureLogger() }

func logged(l *watermill.CaptureLoggerAdapter, substr string) bool {
	for _, msgs := range l.Captured() {
		for _, m := range msgs {
			if strings.Contains(m.Msg, substr) {
				return true
			}
		}
	}
	return false
}

func wsqlStd(t *testing.T, b *bundle) wsql.Beginner {
	return wsql.BeginnerFromStdSQL(b.schema.StdDB(t))
}
