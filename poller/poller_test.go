package poller_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// batchRecorder implements poller.BatchPublisher: it rejects messages whose
// payload is "poison".
type batchRecorder struct{ *recorder }

func (b batchRecorder) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	var ok []*message.Message
	for i, m := range msgs {
		if string(m.Payload) == "poison" {
			errs[i] = errors.New("record too large")
			continue
		}
		ok = append(ok, m)
	}
	return errs, b.recorder.Publish(topic, ok...)
}

func TestPublisherPanicIsAFailedSendNotACrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 2)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error { panic("nil map in the producer") }
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	start(t, p)
	// The call of two messages panics, then the first alone: it counts an
	// attempt and the second is released; the next poll sends the second
	// alone, which counts its attempt.
	stepUntil(t, b.clock, 3, 250*time.Millisecond, time.Minute, func() bool { return len(h.Snapshot().Failures) == 2 })
	require.ErrorContains(t, h.Snapshot().Failures[0].Err, "publisher panicked: nil map in the producer")
	require.Equal(t, 2, b.schema.Count(t, b.schema.Dialect.Tables().Events, "status = 'PENDING' AND retry_count = 1"))
}

func TestCloseFinishesTheBatchInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	inFlight := make(chan struct{})
	release := make(chan struct{})
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		close(inFlight)
		<-release
		return nil
	}
	cfg := b.config("order-created")
	cfg.CloseTimeout = time.Minute
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-inFlight

	closed := make(chan struct{})
	go func() { require.NoError(t, p.Close()); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	require.NoError(t, <-errc)
	require.Equal(t, 3, b.status(t, "PROCESSED"))
}

func TestNewValidatesItsArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	ctx := context.Background()
	tx, err := b.schema.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	cases := map[string]struct {
		db   wsql.Beginner
		pub  message.Publisher
		cfg  poller.Config
		want string
	}{
		"nil db":        {nil, rec, b.config("a"), "db is nil"},
		"transaction":   {txAsBeginner{wsql.TxFromPgx(tx)}, rec, b.config("a"), "db is a transaction"},
		"nil publisher": {b.schema.Beginner, nil, b.config("a"), "publisherOut is nil"},
		"no dialect":    {b.schema.Beginner, rec, poller.Config{EventTypes: []string{"a"}}, "Config.Dialect is nil"},
		"strict without types": {b.schema.Beginner, rec, func() poller.Config {
			c := b.config()
			c.Oncebox.Outbox.StrictEventTypes = true
			return c
		}(), "outbox.strict-event-types"},
		"duplicate types": {b.schema.Beginner, rec, poller.Config{Dialect: b.schema.Dialect, EventTypes: []string{"a", "a"}}, `event type "a" listed twice`},
		"bad schedule": {b.schema.Beginner, rec, func() poller.Config {
			c := b.config("a")
			c.CleanUp = poller.Schedule{Min: time.Hour, Max: time.Minute}
			return c
		}(), "CleanUp"},
		"batches in flight": {b.schema.Beginner, rec, func() poller.Config {
			c := b.config("a")
			c.MaxBatchesInFlight = 17
			return c
		}(), "MaxBatchesInFlight must be between 1 and 16, got 17"},
		"bad oncebox config": {b.schema.Beginner, rec, func() poller.Config {
			c := b.config("a")
			c.Oncebox.Outbox.Defaults.BatchSize = -3
			return c
		}(), "outbox.defaults.batch-size"},
	}
	for name, c := range cases {
		_, err := poller.New(c.db, c.pub, c.cfg, nil)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
		require.ErrorContains(t, err, c.want, name)
	}
	// No event types at all is a relay of whatever is published, as the
	// forwarder is.
	_, err = poller.New(b.schema.Beginner, rec, b.config(), nil)
	require.NoError(t, err)
}

type txAsBeginner struct{ wsql.Tx }

func (txAsBeginner) BeginTx(context.Context, *sql.TxOptions) (wsql.Tx, error) { return nil, nil }

// The poller works the same over database/sql (pgx's stdlib driver): the
// claim, the PROCESSED and the failed finalizes.
func TestPollerOverDatabaseSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 3)
	events := b.schema.Dialect.Tables().Events
	_, err := b.schema.Pool.Exec(context.Background(), "UPDATE "+events+
		" SET payload = 'poison' WHERE id = (SELECT id FROM "+events+" ORDER BY id LIMIT 1)")
	require.NoError(t, err)
	rec := batchRecorder{newRecorder()}
	p, err := poller.New(wsql.BeginnerFromStdSQL(b.schema.StdDB(t)), rec, b.config("order-created"), nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "two PROCESSED, one retried", func() bool {
		return b.status(t, "PROCESSED") == 2 && b.schema.Count(t, events, "status = 'PENDING' AND retry_count = 1") == 1
	})
	got := rec.deliveries()
	require.Len(t, got, 2)
}
