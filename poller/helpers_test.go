package poller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// recorder is a message.Publisher that records what it was given. fn, when
// set, decides the fate of each call before it is recorded.
type recorder struct {
	mu    sync.Mutex
	got   map[string]int // event id -> deliveries
	order []string
	fn    func(topic string, msgs []*message.Message) error
}

func newRecorder() *recorder { return &recorder{got: map[string]int{}} }

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	if r.fn != nil {
		if err := r.fn(topic, msgs); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		id := m.Metadata.Get(oncebox.HeaderEventID)
		r.got[id]++
		r.order = append(r.order, id)
	}
	return nil
}

func (r *recorder) Close() error { return nil }

func (r *recorder) deliveries() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for k, v := range r.got {
		out[k] = v
	}
	return out
}

// hooks records what a poller reports.
type hooks = pollertest.Hooks

type bundle struct {
	schema *pgtest.Schema
	clock  *clockwork.FakeClock
}

func setup(t *testing.T, opts ...pgtest.Option) *bundle {
	t.Helper()
	return &bundle{schema: pgtest.NewSchema(t, opts...), clock: clockwork.NewFakeClockAt(t0)}
}

// publish commits n events of eventType, created at the given clock's time,
// in transactions of at most 1,000.
func (b *bundle) publish(t *testing.T, clock clockwork.Clock, eventType string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for n > 0 {
		k := min(n, 1000)
		n -= k
		tx, err := b.schema.Pool.Begin(ctx)
		require.NoError(t, err)
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: b.schema.Dialect, Clock: clock}, nil)
		require.NoError(t, err)
		msgs := make([]*message.Message, k)
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
		}
		require.NoError(t, pub.Publish(eventType, msgs...))
		require.NoError(t, tx.Commit(ctx))
		for _, m := range msgs {
			ids = append(ids, m.Metadata.Get(oncebox.HeaderEventID))
		}
	}
	return ids
}

// start runs p until the test ends.
func start(t *testing.T, p *poller.Poller) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-p.Running()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
}

var stepUntil = pollertest.StepUntil

var eventually = pollertest.Eventually

func (b *bundle) status(t *testing.T, status string) int {
	return b.schema.Count(t, b.schema.Dialect.Tables().Events, "status = $1", status)
}

// config is a poller of types on the fake clock, of those types only
// (strict: no discovery loop, so the waiters on the clock are the types'
// loops and the jobs); with no type, a poller that discovers every type.
func (b *bundle) config(types ...string) poller.Config {
	c := poller.Config{Dialect: b.schema.Dialect, Clock: b.clock}
	if len(types) > 0 {
		c.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{}
		for _, t := range types {
			c.Oncebox.Outbox.Events[t] = oncebox.EventSettings{}
		}
		c.Oncebox.Outbox.StrictEventTypes = true
	}
	return c
}

// fastPolling is a config for throughput tests on the real clock.
func fastPolling(c poller.Config) poller.Config {
	c.Clock = nil
	c.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: time.Millisecond,
		MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}
	return c
}
