package publisher_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/publisher"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	schema *pgtest.Schema
	trace  *pgtest.StatementCounter
	config publisher.Config
	clock  *clockwork.FakeClock
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	trace := &pgtest.StatementCounter{}
	s := pgtest.NewSchema(t, pgtest.WithTracer(trace))
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	return &testBundle{
		schema: s,
		trace:  trace,
		clock:  clock,
		config: publisher.Config{Dialect: s.Dialect, Clock: clock},
	}
}

// untracedQueueUsage is b's config with the notification queue's usage
// read (as empty) without a statement: the process's first notifying
// transaction on a channel reads it through the transaction (then once per
// WakeQueueCheck), which tests counting the statements of a Publish leave
// out.
func (b *testBundle) untracedQueueUsage() publisher.Config {
	c := b.config
	c.WakeQueueUsage = func(context.Context, wsql.ContextExecutor) (float64, error) { return 0, nil }
	return c
}

// inTx runs fn in a pgx transaction and commits it when commit is true.
func (b *testBundle) inTx(t *testing.T, commit bool, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := b.schema.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if commit {
		return tx.Commit(ctx)
	}
	return tx.Rollback(ctx)
}

func (b *testBundle) events(t *testing.T) int {
	return b.schema.Count(t, b.schema.Dialect.Tables().Events, "")
}

type storedEvent struct {
	ID          string
	EventType   string
	Topic       string
	Key         *string
	MessageUUID string
	Payload     []byte
	Metadata    map[string]string
	Status      string
	RetryCount  int
	NextRetryAt time.Time
	CreatedAt   time.Time
}

func (b *testBundle) stored(t *testing.T) []storedEvent {
	t.Helper()
	rows, err := b.schema.Pool.Query(context.Background(),
		`SELECT id::text, event_type, topic, partition_key, message_uuid, payload, metadata, status,
		        retry_count, next_retry_at, created_at
		   FROM `+b.schema.Dialect.Tables().Events+` ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		var meta []byte
		require.NoError(t, rows.Scan(&e.ID, &e.EventType, &e.Topic, &e.Key, &e.MessageUUID, &e.Payload, &meta,
			&e.Status, &e.RetryCount, &e.NextRetryAt, &e.CreatedAt))
		require.NoError(t, json.Unmarshal(meta, &e.Metadata))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestPublishBatchIsOneStatementWithIncreasingV7IDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgs := make([]*message.Message, 1000)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte{byte(i), byte(i >> 8)})
	}
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.untracedQueueUsage(), nil)
		require.NoError(t, err)
		b.trace.Reset()
		if err := pub.Publish("order-created", msgs...); err != nil {
			return err
		}
		stmts := b.trace.Statements()
		require.Len(t, stmts, 2, "1,000 events are written by one statement, then the wake-up notification")
		require.True(t, strings.HasPrefix(stmts[0], "INSERT INTO "), stmts[0][:40])
		require.Equal(t, "SELECT pg_notify($1, $2)", stmts[1])
		return nil
	})
	require.NoError(t, err)

	got := b.stored(t)
	require.Len(t, got, 1000)
	var prev oncebox.EventID
	for i, m := range msgs {
		id, err := oncebox.EventIDOf(m)
		require.NoError(t, err)
		require.Equal(t, 7, id.Version(), "event %d", i)
		require.Equal(t, 2, int(id[8]>>6), "RFC 9562 variant, event %d", i)
		require.Positive(t, strings.Compare(id.String(), prev.String()), "ids increase: event %d", i)
		prev = id
		// Rows are ordered by id: the i-th row is the i-th message.
		require.Equal(t, m.UUID, got[i].MessageUUID)
		require.Equal(t, m.Payload, message.Payload(got[i].Payload))
		require.Equal(t, id.String(), got[i].ID)
	}
}

func TestPublishSplitsPastTheParameterLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// PostgreSQL takes 8,191 rows in one INSERT: 65,535 bind parameters,
	// eight a row (the dialect's golden test checks it).
	n := 65535/8 + 5
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), nil)
	}
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.untracedQueueUsage(), nil)
		require.NoError(t, err)
		b.trace.Reset()
		err = pub.Publish("bulk", msgs...)
		require.Len(t, b.trace.Statements(), 3, "two INSERTs and the wake-up notification")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, n, b.events(t))
}

func TestPublishConfiguredTypesAndTopics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.config.Oncebox = oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{Topic: "events"},
		Events: map[string]oncebox.EventSettings{
			"create-order":  {Topic: "orders"},
			"high-priority": {},
		},
	}}
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("create-order", message.NewMessage("a", nil)))
		require.NoError(t, pub.Publish("high-priority", message.NewMessage("b", nil)))

		// A type nobody configured is published with the defaults (the
		// relay discovers it), as the forwarder relays whatever it is given.
		require.NoError(t, pub.Publish("order-shipped", message.NewMessage("c", nil)))
		return nil
	})
	require.NoError(t, err)
	topics := map[string]string{}
	for _, e := range b.stored(t) {
		topics[e.EventType] = e.Topic
	}
	require.Equal(t, map[string]string{"create-order": "orders", "high-priority": "events", "order-shipped": "events"}, topics)

	// Strict mode refuses what is not configured, and writes nothing.
	b.config.Oncebox.Outbox.StrictEventTypes = true
	err = b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		err = pub.Publish("create-ordr", message.NewMessage("d", nil))
		require.ErrorIs(t, err, oncebox.ErrUnknownEventType)
		require.ErrorContains(t, err, `"create-ordr"`)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, b.stored(t), 3)
}

func TestPublishRefusesBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.config.Oncebox.Outbox.MaxPayloadSize = 16

	withMeta := func(k, v string) *message.Message {
		m := message.NewMessage("m", nil)
		m.Metadata.Set(k, v)
		return m
	}
	good := func() *message.Message { return message.NewMessage("good", []byte("ok")) }
	cases := []struct {
		name  string
		topic string
		msgs  []*message.Message
		want  string
	}{
		{"no messages", "t", nil, "no messages"},
		{"nil message", "t", []*message.Message{good(), nil}, "message 1 is nil"},
		{"empty topic", "", []*message.Message{good()}, "event type (topic) \"\": is empty"},
		{"oversized topic", strings.Repeat("x", 256), []*message.Message{good()}, "256 bytes long, more than 255"},
		{"topic with NUL", "a\x00b", []*message.Message{good()}, "NUL"},
		{"invalid UTF-8 topic", "a\xffb", []*message.Message{good()}, "not valid UTF-8"},
		{"payload over the limit", "t", []*message.Message{good(), message.NewMessage("big", make([]byte, 17))},
			"message 1 (uuid \"big\"): payload is 17 bytes and metadata 0 (keys and values), 17 in all, more than outbox.max-payload-size 16"},
		// The limit counts the bytes of every metadata key and value: the
		// broker receives them as headers, in the same record.
		{"metadata over the limit", "t", []*message.Message{good(), withMeta("k", strings.Repeat("v", 16))},
			"message 1 (uuid \"m\"): payload is 0 bytes and metadata 17 (keys and values), 17 in all, more than outbox.max-payload-size 16"},
		{"empty message uuid", "t", []*message.Message{message.NewMessage("", nil)}, "uuid \"\" is empty"},
		{"metadata value with NUL", "t", []*message.Message{withMeta("k", "a\x00")}, `metadata "k" has a value that is not valid UTF-8`},
		{"metadata key invalid UTF-8", "t", []*message.Message{withMeta("\xff", "v")}, "metadata key \"\\xff\""},
		{"empty metadata key", "t", []*message.Message{withMeta("", "v")}, "metadata has an empty key"},
		{"oversized key", "t", []*message.Message{withMeta(oncebox.HeaderKey, strings.Repeat("k", 300))}, "ordering key is 300 bytes long"},
		// The relay writes the message UUID under this header itself; Kafka's
		// would refuse the event at every attempt until it went to the DLQ.
		{"watermill UUID header", "t", []*message.Message{good(), withMeta("_watermill_message_uuid", "x")},
			`message 1 (uuid "m"): metadata key "_watermill_message_uuid" is reserved`},
	}
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		for _, c := range cases {
			b.trace.Reset()
			err := pub.Publish(c.topic, c.msgs...)
			require.ErrorIs(t, err, oncebox.ErrInvalidInput, c.name)
			require.ErrorContains(t, err, c.want, c.name)
			require.Empty(t, b.trace.Statements(), "%s: nothing is sent to the database", c.name)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 0, b.events(t))
}

// TestPublishSizeLimitCountsMetadata: 8 MiB of metadata on a tiny payload
// used to be written, then refused by the broker at every attempt. Exactly
// the limit, payload and metadata together, is accepted.
func TestPublishSizeLimitCountsMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		huge := message.NewMessage("huge", []byte("{}"))
		huge.Metadata.Set("blob", strings.Repeat("x", 8<<20))
		b.trace.Reset()
		err = pub.Publish("t", huge)
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
		require.ErrorContains(t, err, `message 0 (uuid "huge"): payload is 2 bytes and metadata 8388612 (keys and values), 8388614 in all, more than outbox.max-payload-size 1048576`)
		require.Empty(t, b.trace.Statements(), "nothing is sent to the database")

		// key (4) + value + payload (2) = the limit exactly.
		full := message.NewMessage("full", []byte("{}"))
		full.Metadata.Set("blob", strings.Repeat("x", oncebox.DefaultMaxPayloadSize-6))
		return pub.Publish("t", full)
	})
	require.NoError(t, err)
	stored := b.stored(t)
	require.Len(t, stored, 1)
	require.Equal(t, "full", stored[0].MessageUUID)
}

func TestNewPublisherRefusesWhatIsNotATransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)

	_, err := publisher.NewPublisher(nil, b.config, nil)
	require.ErrorIs(t, err, oncebox.ErrNoTransaction)

	_, err = publisher.NewPublisher(wsql.BeginnerFromPgx(b.schema.Pool), b.config, nil)
	require.ErrorIs(t, err, oncebox.ErrNoTransaction)
	require.ErrorContains(t, err, "AllowNonTransactionalDangerously")

	_, err = publisher.NewPublisher(wsql.BeginnerFromStdSQL(b.schema.StdDB(t)), b.config, nil)
	require.ErrorIs(t, err, oncebox.ErrNoTransaction)

	_, err = publisher.NewPublisher(wsql.BeginnerFromPgx(b.schema.Pool), publisher.Config{}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig, "a missing dialect is named")

	// The explicit opt-in writes and commits on its own.
	cfg := b.config
	cfg.AllowNonTransactionalDangerously = true
	pub, err := publisher.NewPublisher(wsql.BeginnerFromPgx(b.schema.Pool), cfg, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Publish("t", message.NewMessage("a", nil)))
	require.Equal(t, 1, b.events(t))
}

func TestPublishAfterClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Close())
		return pub.Publish("t", message.NewMessage("a", nil))
	})
	require.ErrorIs(t, err, oncebox.ErrClosed)
	require.Equal(t, 0, b.events(t))
}

func TestPublishJSONAndEmit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type order struct {
		ID    string `json:"id"`
		Total int    `json:"total"`
	}
	createOrder := func(ctx context.Context, tx wsql.ContextExecutor, in order) (order, error) {
		if in.Total < 0 {
			return order{}, errors.New("negative total")
		}
		_, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+b.schema.Name+".orders (id text primary key)")
		if err != nil {
			return order{}, err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO "+b.schema.Name+".orders (id) VALUES ($1)", in.ID)
		return in, err
	}
	emit := publisher.Emit(b.config, "order-created", createOrder, publisher.EmitOptions[order, order]{
		Key: func(in, _ order) string { return in.ID },
	})
	emitInput := publisher.Emit(b.config, "order-requested", createOrder, publisher.EmitOptions[order, order]{
		Payload: func(in, _ order) any { return map[string]int{"requested": in.Total} },
	})

	ctx := context.Background()
	err := b.inTx(t, true, func(tx pgx.Tx) error {
		if _, err := emit(ctx, wsql.TxFromPgx(tx), order{ID: "o-1", Total: 5}); err != nil {
			return err
		}
		if _, err := emitInput(ctx, wsql.TxFromPgx(tx), order{ID: "o-2", Total: 7}); err != nil {
			return err
		}
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		msg, err := publisher.PublishJSON(ctx, pub, "order-noted", order{ID: "o-3"}, publisher.WithMetadata("source", "test"))
		require.NoError(t, err)
		require.NotEmpty(t, msg.Metadata.Get(oncebox.HeaderEventID))
		_, err = publisher.PublishJSON(ctx, pub, "bad", make(chan int))
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
		return nil
	})
	require.NoError(t, err)

	// A failing function publishes nothing.
	err = b.inTx(t, true, func(tx pgx.Tx) error {
		_, err := emit(ctx, wsql.TxFromPgx(tx), order{ID: "o-4", Total: -1})
		require.EqualError(t, err, "negative total")
		return nil
	})
	require.NoError(t, err)

	got := b.stored(t)
	require.Len(t, got, 3)
	require.Equal(t, "order-created", got[0].EventType)
	require.JSONEq(t, `{"id":"o-1","total":5}`, string(got[0].Payload))
	require.Equal(t, "o-1", *got[0].Key)
	require.Equal(t, "order-requested", got[1].EventType)
	require.JSONEq(t, `{"requested":7}`, string(got[1].Payload))
	require.Equal(t, "order-noted", got[2].EventType)
	require.Equal(t, "test", got[2].Metadata["source"])
	require.Equal(t, "application/json", got[2].Metadata["content_type"])
}
