package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/service"
)

func TestMain(m *testing.M) {
	// golang-lru's expirable cache runs one expiry goroutine per cache for
	// the life of the process. pgxpool, after a connection was destroyed
	// (a test that closes a pool's connection under it), starts a goroutine
	// that sleeps 500ms before a health check, and ends by itself.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).triggerHealthCheck.func1"))
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// bundle is one test's database (a fresh schema, or database on MySQL),
// fake clock and in-process broker.
type bundle struct {
	*dbtest.Env
	schema string
	clock  *clockwork.FakeClock
	broker *gochannel.GoChannel
}

func setup(t *testing.T, tg dbtest.Target) *bundle {
	t.Helper()
	t.Parallel()
	e := tg.New(t)
	b := &bundle{Env: e, schema: strings.Split(e.Tables.Events, ".")[0], clock: clockwork.NewFakeClockAt(t0),
		broker: gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})}
	t.Cleanup(func() { _ = b.broker.Close() })
	_, err := e.DB.ExecContext(context.Background(), "CREATE TABLE "+b.schema+".effects (event_id varchar(64))")
	require.NoError(t, err)
	return b
}

// config loads a YAML document of the oncebox section's body (indented by
// two spaces), as a service reads its file.
func config(t *testing.T, body string, args ...any) oncebox.Config {
	t.Helper()
	cfg, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n" + fmt.Sprintf(body, args...)))
	require.NoError(t, err)
	return cfg
}

// consumerYAML is a consuming service on the test's schema: one retry, the
// DLQ on, fast polling so the relay sends what the DLQ retry gives back.
const consumerYAML = `
  tables: {schema: %s}
  outbox:
    defaults: {polling: {min-fixed-delay: 1ms, max-fixed-delay: 10ms}}
    dlq: {enabled: true}
  inbox:
    enabled: true
    retry: {max-retries: 1, initial-interval: 1ms}
`

// newService builds a service over the bundle's handle with its fake clock.
func (b *bundle) newService(t *testing.T, cfg oncebox.Config, opts ...service.Option) *service.Service {
	t.Helper()
	svc, err := service.New(b.Beginner, cfg, watermill.NopLogger{}, append([]service.Option{service.WithClock(b.clock)}, opts...)...)
	require.NoError(t, err)
	return svc
}

// run runs svc until the test ends.
func run(t *testing.T, svc *service.Service) { pollertest.Start(t, svc) }

// router runs a router whose one handler consumes topic through
// svc.Middleware until the test ends.
func (b *bundle) router(t *testing.T, svc *service.Service, topic string, h message.NoPublishHandlerFunc) {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	r.AddMiddleware(svc.Middleware)
	r.AddConsumerHandler("ship-order", topic, b.broker, h)
	pollertest.Start(t, r)
}

// effects is a handler that writes one effect row per run in the inbox's
// transaction and then returns what fail says for that run.
type effects struct {
	b    *bundle
	mu   sync.Mutex
	runs map[string]int
	fail func(run int) error
}

func (b *bundle) effects(fail func(run int) error) *effects {
	return &effects{b: b, runs: map[string]int{}, fail: fail}
}

func (e *effects) handle(msg *message.Message) error {
	key := msg.Metadata.Get(oncebox.HeaderEventID)
	e.mu.Lock()
	e.runs[key]++
	run := e.runs[key]
	e.mu.Unlock()
	tx, ok := middleware.TxFromContext(msg.Context())
	if !ok {
		return fmt.Errorf("no inbox transaction")
	}
	if _, err := tx.ExecContext(msg.Context(), "INSERT INTO "+e.b.schema+".effects VALUES ("+e.b.P(1)+")", key); err != nil {
		return err
	}
	if e.fail != nil {
		return e.fail(run)
	}
	return nil
}

func (e *effects) count(t *testing.T, key string) int {
	return e.b.Count(t, e.b.schema+".effects", "event_id = "+e.b.P(1), key)
}

// event is a message as the relay sends it.
func event(t *testing.T) (*message.Message, string) {
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`))
	msg.Metadata.Set(oncebox.HeaderEventID, id.String())
	msg.Metadata.Set(oncebox.HeaderEventType, "order-created")
	return msg, id.String()
}

// begin starts a transaction on the bundle's handle.
func (b *bundle) begin(t *testing.T) wsql.Tx {
	tx, err := b.Beginner.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	return tx
}

// eventually advances the fake clock by step until cond holds, for at most
// a minute of real time.
func (b *bundle) eventually(t *testing.T, what string, step time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		b.clock.Advance(step)
		return false
	}, time.Minute, 10*time.Millisecond, what)
}

func dlqFilterConsumer() dlq.Filter { return dlq.Filter{Source: oncebox.DLQSourceConsumer} }

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func middlewareInboxConfigWithDialect(b *bundle) middleware.InboxConfig {
	return middleware.InboxConfig{Dialect: b.Dialect}
}

// foreignBeginner hides the handle's type, as a wrapper of the caller's
// would.
type foreignBeginner struct{ wsql.Beginner }
