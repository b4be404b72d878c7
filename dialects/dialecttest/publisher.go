package dialecttest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/publisher"
)

type storedEvent struct {
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

func (s *suite) stored(t *testing.T, id oncebox.EventID) storedEvent {
	t.Helper()
	var e storedEvent
	var meta []byte
	require.NoError(t, s.DB.QueryRowContext(context.Background(),
		`SELECT event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, next_retry_at, created_at
		   FROM `+s.Tables.Events+` WHERE id = `+s.P(1), s.ID(id)).
		Scan(&e.EventType, &e.Topic, &e.Key, &e.MessageUUID, &e.Payload, &meta, &e.Status, &e.RetryCount, &e.NextRetryAt, &e.CreatedAt))
	require.NoError(t, json.Unmarshal(meta, &e.Metadata))
	return e
}

func testPublisher(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	cfg := publisher.Config{Dialect: s.Dialect, Clock: s.clock}

	t.Run("commit makes the row visible with every column", func(t *testing.T) {
		msg := message.NewMessage("msg-1", []byte(`{"order":1}`))
		msg.Metadata.Set("tenant", "acme")
		msg.Metadata.Set("unicode", "zürich ✓")
		oncebox.SetKey(msg, "order-1")
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, cfg, watermill.NopLogger{})
		require.NoError(t, err)
		require.NoError(t, pub.Publish("order-created", msg))
		require.Zero(t, s.Count(t, s.Tables.Events, "message_uuid = "+s.P(1), "msg-1"), "invisible before the commit")
		require.NoError(t, tx.Commit())

		id, err := oncebox.EventIDOf(msg)
		require.NoError(t, err)
		e := s.stored(t, id)
		require.Equal(t, "order-created", e.EventType)
		require.Equal(t, "order-created", e.Topic, "without configuration the topic is the event type")
		require.NotNil(t, e.Key)
		require.Equal(t, "order-1", *e.Key)
		require.Equal(t, "msg-1", e.MessageUUID)
		require.Equal(t, []byte(`{"order":1}`), e.Payload)
		require.Equal(t, "PENDING", e.Status)
		require.Zero(t, e.RetryCount)
		require.True(t, e.CreatedAt.Equal(t0), "created_at comes from the injected clock: %s", e.CreatedAt)
		require.True(t, e.NextRetryAt.Equal(e.CreatedAt), "next_retry_at starts at created_at")
		// The event id and type are in their columns only (issue 28:
		// narrower rows): the relay adds them to the message it sends.
		require.Equal(t, map[string]string{
			"tenant": "acme", "unicode": "zürich ✓", oncebox.HeaderKey: "order-1",
		}, e.Metadata)
	})

	t.Run("a republished message's old event id and type are not stored, the new ones are set", func(t *testing.T) {
		old, err := oncebox.NewEventID()
		require.NoError(t, err)
		msg := message.NewMessage("msg-again", []byte(`{}`))
		msg.Metadata.Set(oncebox.HeaderEventID, old.String())
		msg.Metadata.Set(oncebox.HeaderEventType, "consumed-type")
		msg.Metadata.Set("tenant", "acme")
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, cfg, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("order-shipped", msg))
		require.NoError(t, tx.Commit())

		id, err := oncebox.EventIDOf(msg)
		require.NoError(t, err)
		require.NotEqual(t, old, id, "the republished message is a new event")
		require.Equal(t, "order-shipped", msg.Metadata.Get(oncebox.HeaderEventType))
		e := s.stored(t, id)
		require.Equal(t, "order-shipped", e.EventType)
		require.Equal(t, map[string]string{"tenant": "acme"}, e.Metadata)
	})

	t.Run("rollback leaves nothing, database/sql too", func(t *testing.T) {
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, cfg, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("rolled-back", message.NewMessage("a", []byte("x")), message.NewMessage("b", []byte("y"))))
		var n int
		rows, err := tx.QueryContext(ctx, "SELECT count(*) FROM "+s.Tables.Events+" WHERE event_type = "+s.P(1), "rolled-back")
		require.NoError(t, err)
		require.True(t, rows.Next())
		require.NoError(t, rows.Scan(&n))
		require.NoError(t, rows.Close())
		require.Equal(t, 2, n, "visible inside the transaction")
		require.NoError(t, tx.Rollback())
		require.Zero(t, s.Count(t, s.Tables.Events, "event_type = "+s.P(1), "rolled-back"))

		// The same over a database/sql transaction.
		stx, err := s.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		pub, err = publisher.NewPublisher(wsql.TxFromStdSQL(stx), cfg, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("std", message.NewMessage("std-1", nil)))
		require.NoError(t, stx.Commit())
		stx, err = s.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		pub, err = publisher.NewPublisher(wsql.TxFromStdSQL(stx), cfg, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("std", message.NewMessage("std-2", nil)))
		require.NoError(t, stx.Rollback())
		require.Equal(t, 1, s.Count(t, s.Tables.Events, "event_type = "+s.P(1), "std"))
	})

	t.Run("many events in one call, split past the rows of one statement, ids increasing", func(t *testing.T) {
		// One INSERT takes 7,281 rows on PostgreSQL and MySQL (65,535 bind
		// parameters, nine a row), 83 on Oracle: past them all.
		n := 65535/9 + 5
		msgs := make([]*message.Message, n)
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), []byte{byte(i), byte(i >> 8)})
		}
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, cfg, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("bulk", msgs...))
		require.NoError(t, tx.Commit())
		require.Equal(t, n, s.Count(t, s.Tables.Events, "event_type = "+s.P(1), "bulk"))
		var prev oncebox.EventID
		for i, m := range msgs {
			id, err := oncebox.EventIDOf(m)
			require.NoError(t, err)
			require.Equal(t, 7, id.Version(), "event %d", i)
			require.Positive(t, strings.Compare(id.String(), prev.String()), "ids increase: event %d", i)
			prev = id
		}
		last := msgs[n-1]
		id, _ := oncebox.EventIDOf(last)
		require.Equal(t, []byte(last.Payload), s.stored(t, id).Payload, "the last row of the second statement")
	})

	t.Run("bad input is named and nothing is written", func(t *testing.T) {
		c := cfg
		c.Oncebox.Outbox.MaxPayloadSize = 16
		tx := s.begin(t)
		defer func() { _ = tx.Rollback() }()
		pub, err := publisher.NewPublisher(tx, c, nil)
		require.NoError(t, err)
		good := message.NewMessage("good", []byte("ok"))
		for _, bad := range []struct {
			topic string
			msgs  []*message.Message
			want  string
		}{
			{"bad", []*message.Message{good, message.NewMessage("big", make([]byte, 17))}, `message 1 (uuid "big"): payload is 17 bytes`},
			{"bad", []*message.Message{good, nil}, "message 1 is nil"},
			{"", []*message.Message{good}, "is empty"},
			{"a\xffb", []*message.Message{good}, "not valid UTF-8"},
		} {
			err := pub.Publish(bad.topic, bad.msgs...)
			require.ErrorIs(t, err, oncebox.ErrInvalidInput, bad.want)
			require.ErrorContains(t, err, bad.want)
		}
		require.NoError(t, tx.Commit())
		require.Zero(t, s.Count(t, s.Tables.Events, "message_uuid = "+s.P(1), "good"))
	})

	t.Run("a database error is returned and no id handed out", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		tx := s.begin(t)
		defer func() { _ = tx.Rollback() }()
		pub, err := publisher.NewPublisher(tx, cfg, nil)
		require.NoError(t, err)
		msg := message.NewMessage("cancelled", nil)
		msg.SetContext(cctx)
		cancel()
		err = pub.Publish("t", msg)
		require.ErrorContains(t, err, `publish 1 events of type "t"`)
		require.Empty(t, msg.Metadata.Get(oncebox.HeaderEventID))
	})

	t.Run("not a transaction is refused unless opted in", func(t *testing.T) {
		_, err := publisher.NewPublisher(s.Beginner, cfg, nil)
		require.ErrorIs(t, err, oncebox.ErrNoTransaction)
		require.ErrorContains(t, err, "AllowNonTransactionalDangerously")
		_, err = publisher.NewPublisher(wsql.BeginnerFromStdSQL(s.DB), cfg, nil)
		require.ErrorIs(t, err, oncebox.ErrNoTransaction)
		c := cfg
		c.AllowNonTransactionalDangerously = true
		pub, err := publisher.NewPublisher(s.Beginner, c, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("autocommit", message.NewMessage("a", nil)))
		require.Equal(t, 1, s.Count(t, s.Tables.Events, "event_type = "+s.P(1), "autocommit"))
	})
}
