package postgres_test

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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/service"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx's pool closes its background health check asynchronously.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("time.Sleep"))
}

const topic = "order-placed"

// newPool opens a pool on dsn (a URL or key=value DSN) with pgx's
// default_query_exec_mode set to mode ("" keeps pgx's default,
// cache_statement) and closes it when the test ends.
func newPool(t *testing.T, dsn, mode string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err, dsn)
	cfg.MaxConns = maxConns
	switch mode {
	case "":
	case "exec":
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	default:
		t.Fatalf("newPool: unknown mode %q", mode)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// ledger counts, per event id, the messages that reached the consumer
// (before the inbox: the broker's deliveries, duplicates included) and the
// handler's calls (after the inbox: what the service saw).
type ledger struct {
	mu      sync.Mutex
	arrived map[string]int
	handled map[string]int
}

func newLedger() *ledger {
	return &ledger{arrived: map[string]int{}, handled: map[string]int{}}
}

func (l *ledger) count(m map[string]int, msg *message.Message) {
	l.mu.Lock()
	m[msg.Metadata.Get(oncebox.HeaderEventID)]++
	l.mu.Unlock()
}

// handledCount is how many distinct events the handler saw.
func (l *ledger) handledCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.handled)
}

// check requires that the handler saw each of ids exactly once and
// nothing else, and returns how many messages arrived beyond one per
// event (the at-least-once duplicates the inbox removed).
func (l *ledger) check(t *testing.T, ids []string) (duplicates int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	want := make(map[string]bool, len(ids))
	var missing, twice []string
	for _, id := range ids {
		want[id] = true
		switch n := l.handled[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s×%d", id, n))
		}
	}
	var extra []string
	for id := range l.handled {
		if !want[id] {
			extra = append(extra, id)
		}
	}
	require.Empty(t, missing, "committed events never handled")
	require.Empty(t, twice, "events handled more than once (the inbox let a duplicate through)")
	require.Empty(t, extra, "events handled that were never committed")
	for _, id := range ids {
		duplicates += l.arrived[id] - 1
	}
	return duplicates
}

// serviceConfig is the configuration of every service of these tests:
// the inbox on (it needs the DLQ), the polling delays given, so that a
// test can make the wake-up on commit the only fast path, the batch size
// and the outbox clean-up's ttl.
func serviceConfig(t *testing.T, minDelay, maxDelay, cleanUpTTL string, batchSize int) oncebox.Config {
	t.Helper()
	cfg, err := oncebox.LoadConfig(strings.NewReader(fmt.Sprintf(`
oncebox:
  outbox:
    defaults:
      polling: {min-fixed-delay: %s, max-fixed-delay: %s}
      batch-size: %d
    dlq: {enabled: true}
    clean-up: {ttl: %s}
  inbox:
    enabled: true
`, minDelay, maxDelay, batchSize, cleanUpTTL)))
	require.NoError(t, err)
	return cfg
}

// startService runs svc until the test ends.
func startService(t *testing.T, svc *service.Service) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- svc.Run(context.Background()) }()
	select {
	case <-svc.Running():
	case err := <-errc:
		t.Fatalf("service stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("service did not start in 30s")
	}
	t.Cleanup(func() {
		require.NoError(t, svc.Close())
		require.NoError(t, <-errc)
	})
}

// newConsumer builds a service over pool that relays to broker and
// consumes topic from it through the inbox, counting into l. relayCfg
// is the relay's poller.Config (its Listener, above all).
func newConsumer(t *testing.T, pool *pgxpool.Pool, broker *gochannel.GoChannel, cfg oncebox.Config,
	relayCfg poller.Config, l *ledger, logger watermill.LoggerAdapter, opts ...service.Option) *service.Service {
	t.Helper()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, logger)
	require.NoError(t, err)
	opts = append([]service.Option{service.WithRelay(broker), service.WithRouter(router), service.WithRelayConfig(relayCfg)}, opts...)
	svc, err := service.New(wsql.BeginnerFromPgx(pool), cfg, logger, opts...)
	require.NoError(t, err)
	h := router.AddConsumerHandler("consume", topic, broker, func(msg *message.Message) error {
		l.count(l.handled, msg)
		return nil
	})
	// Counted before the inbox: every delivery; after it: every handling.
	h.AddMiddleware(func(next message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			l.count(l.arrived, msg)
			return next(msg)
		}
	}, svc.Middleware)
	return svc
}

// newRelay builds a relay-only service over pool.
func newRelay(t *testing.T, pool *pgxpool.Pool, broker *gochannel.GoChannel, cfg oncebox.Config,
	relayCfg poller.Config, logger watermill.LoggerAdapter) *service.Service {
	t.Helper()
	cfg.Inbox.Enabled = false
	svc, err := service.New(wsql.BeginnerFromPgx(pool), cfg, logger,
		service.WithRelay(broker), service.WithRelayConfig(relayCfg))
	require.NoError(t, err)
	return svc
}

// publishOne publishes one event in a transaction of its own through svc's
// publisher, and returns its id once committed.
func publishOne(ctx context.Context, svc *service.Service, pool *pgxpool.Pool, i int) (string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	pub, err := svc.PgxPublisher(tx)
	if err != nil {
		return "", err
	}
	msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf(`{"order":%d}`, i)))
	if err := pub.Publish(topic, msg); err != nil {
		return "", err
	}
	id := msg.Metadata.Get(oncebox.HeaderEventID)
	if id == "" {
		return "", fmt.Errorf("publish: no %s on the published message", oncebox.HeaderEventID)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	return id, nil
}

// waitHandled waits until the handler saw n distinct events.
func waitHandled(t *testing.T, l *ledger, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for l.handledCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events handled after %s", l.handledCount(), n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noErrors requires that the logger captured no ERROR.
func noErrors(t *testing.T, logger *watermill.CaptureLoggerAdapter) {
	t.Helper()
	for _, m := range logger.Captured()[watermill.ErrorLogLevel] {
		t.Errorf("logged an error: %s: %v %v", m.Msg, m.Err, m.Fields)
	}
}
