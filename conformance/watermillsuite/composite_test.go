package watermillsuite_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// suiteBatchSize is the relay's batch size. The suite's largest single
// Publish call is 100 messages (TestPublishSubscribe, and
// TestPublishSubscribeInOrder in short mode), so one claim takes such a
// call whole.
const suiteBatchSize = 100

// suiteOnceboxConfig is the outbox configuration of the suite: no event
// types, so that the relay discovers every topic the suite invents and
// sends it to the topic of the same name with the defaults block, polled
// fast so that the suite's 15-second read timeouts measure the broker, not
// the relay's idle pacing (1m by default).
func suiteOnceboxConfig() oncebox.Config {
	return oncebox.Config{Outbox: oncebox.OutboxConfig{Defaults: oncebox.EventSettings{
		BatchSize: suiteBatchSize,
		Polling: oncebox.PollingSettings{
			MinFixedDelay: time.Millisecond,
			MaxFixedDelay: 20 * time.Millisecond,
			Multiplier:    2,
		},
	}}}
}

// outbox is the PostgreSQL side of a composite: one migrated schema and the
// relay that runs over it for the whole of a broker's test function. Every
// Publisher and Subscriber the suite's constructors build shares it, as
// every instance of a service shares its database: the suite hands messages
// published by one constructor's Publisher to another's Subscriber.
type outbox struct {
	schema    *pgtest.Schema
	pubConfig publisher.Config
}

// startOutbox migrates a fresh schema and runs a relay over it that sends
// to relayOut, until the test (with all its parallel subtests) ends.
func startOutbox(t *testing.T, relayOut message.Publisher) *outbox {
	t.Helper()
	return startRelays(t, suiteOnceboxConfig(), relayOut)
}

// startRelays is startOutbox with the outbox configuration cfg and one
// relay instance per publisher of relayOuts, all over the same schema.
func startRelays(t *testing.T, cfg oncebox.Config, relayOuts ...message.Publisher) *outbox {
	t.Helper()
	// The suite publishes from up to 50 goroutines at once in several
	// parallel tests (AddSimpleMessagesParallel), each Publish holding a
	// connection for its transaction; pgtest's default of 8 would make them
	// queue behind the relay.
	s := pgtest.NewSchema(t, func(c *pgxpool.Config) { c.MaxConns = 24 })
	for i, relayOut := range relayOuts {
		p, err := poller.New(s.Beginner, relayOut, poller.Config{
			Dialect:    s.Dialect,
			Oncebox:    cfg,
			InstanceID: fmt.Sprintf("suite-relay-%d", i),
			// The suite runs a dozen tests in parallel, each on its own topics,
			// so a dozen discovered loops or more poll at once; the default
			// (2 + 1 without configured types) would serialise them.
			MaxConcurrentQueries: 8,
		}, errorLogger{})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		t.Cleanup(func() {
			require.NoError(t, p.Close())
			require.NoError(t, <-errc)
		})
	}
	return &outbox{schema: s, pubConfig: publisher.Config{Dialect: s.Dialect, Oncebox: cfg}}
}

// publisher returns the composite's message.Publisher. beforePublish, when
// not nil, runs once per topic before its first event is written (the
// RabbitMQ test declares the topic's queues there).
func (o *outbox) publisher(beforePublish func(topic string) error) *outboxPublisher {
	return &outboxPublisher{o: o, beforePublish: beforePublish, prepared: map[string]bool{}}
}

// outboxPublisher is the composite's message.Publisher: each Publish call is
// one PostgreSQL transaction that writes the messages to the outbox with
// event type = topic and commits. That is the outbox's contract: an event
// is published if and only if its transaction commits; the relay delivers
// it later. Close closes this handle only; the relay belongs to the outbox.
type outboxPublisher struct {
	o             *outbox
	beforePublish func(topic string) error

	mu       sync.Mutex
	prepared map[string]bool
	closed   bool
}

// Publish writes msgs as events of type topic in one transaction.
func (p *outboxPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	closed := p.closed
	prepare := p.beforePublish != nil && !p.prepared[topic]
	p.mu.Unlock()
	if closed {
		return oncebox.ErrClosed
	}
	if prepare {
		if err := p.beforePublish(topic); err != nil {
			return fmt.Errorf("prepare topic %s: %w", topic, err)
		}
		p.mu.Lock()
		p.prepared[topic] = true
		p.mu.Unlock()
	}
	ctx := context.Background()
	tx, err := p.o.schema.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), p.o.pubConfig, nil)
	if err != nil {
		return err
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Close makes further Publish calls fail with oncebox.ErrClosed.
func (p *outboxPublisher) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return nil
}

// closeAtEnd closes sub when the suite test that built it ends, if the
// suite has not closed it before (Close is idempotent in watermill-kafka
// and watermill-amqp). Watermill v1.5.3's TestPublishSubscribeInOrder
// never closes its ten subscribers: `defer require.NoError(t, sub.Close())`
// calls Close when the defer statement runs, before Subscribe has built
// them, so without this they would outlive the test and goleak would
// (rightly) fail the package.
func closeAtEnd(t *testing.T, sub message.Subscriber) {
	t.Cleanup(func() {
		if err := sub.Close(); err != nil {
			t.Errorf("close subscriber: %v", err)
		}
	})
}

// groupFor is the consumer group of the suite's plain constructor: one per
// suite test (t is the suite's per-test subtest), so that the subscribers a
// test builds share their group's offsets, as they share watermill-kafka's
// "test" group in its own suite run, while the tests running in parallel do
// not rebalance each other's groups.
func groupFor(t *testing.T) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return "suite-" + hex.EncodeToString(sum[:8])
}

// errorLogger passes the relay's errors to the standard logger (never to
// t.Log, which panics once the subtest that logs has ended) and drops the
// rest, so that a relay failure shows in the test output.
type errorLogger struct{ fields watermill.LogFields }

func (l errorLogger) Error(msg string, err error, fields watermill.LogFields) {
	log.Printf("relay error: %s: %v %v %v", msg, err, l.fields, fields)
}
func (errorLogger) Info(string, watermill.LogFields)  {}
func (errorLogger) Debug(string, watermill.LogFields) {}
func (errorLogger) Trace(string, watermill.LogFields) {}
func (l errorLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return errorLogger{fields: l.fields.Add(fields)}
}
