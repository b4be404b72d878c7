package dialecttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// failingConsumer runs a router whose handler "ship" on topic "orders"
// always fails, behind a Consumer (poison queue, Retry with retries
// retries, inbox); it returns the channel to publish on and the handler's
// run count.
func failingConsumer(t *testing.T, s *inboxSuite, retries int) (*gochannel.GoChannel, *atomic.Int64) {
	t.Helper()
	poison, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect, Clock: s.clock}, nil)
	require.NoError(t, err)
	consumer, err := middleware.NewConsumer(middleware.ConsumerConfig{PoisonQueue: poison, Inbox: s.inbox(t),
		Retry: oncebox.RetryConfig{MaxRetries: oncebox.Int(retries), InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}, nil)
	require.NoError(t, err)
	pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	router.AddMiddleware(consumer.Middleware)
	runs := new(atomic.Int64)
	router.AddConsumerHandler("ship", "orders", pubSub, func(*message.Message) error {
		runs.Add(1)
		return errors.New("the carrier refused the parcel")
	})
	startRouter(t, router)
	return pubSub, runs
}

// parked waits for the DLQ row of the consumer "ship" that holds the
// message msgUUID with retry_count = retries, and returns it.
func (s *inboxSuite) parked(t *testing.T, st *dlq.Store, msgUUID string, retries int) dlq.Row {
	t.Helper()
	var got dlq.Row
	eventually(t, "the message is parked", func() bool {
		rows, _, err := st.List(context.Background(), dlq.Filter{Source: oncebox.DLQSourceConsumer}, dlq.Page{Limit: 10})
		require.NoError(t, err)
		for _, r := range rows {
			if r.MessageUUID == msgUUID && r.RetryCount == retries {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// A consumer's parked row counts the handler's attempts: 4 after Retry's 3
// retries gave up, 8 after a redelivery failed 4 more times. Before, it
// showed 1 (one per delivery), which hid the retries from the operator.
func testDLQConsumerRowCountsHandlerAttempts(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	st := s.store(t)
	pubSub, runs := failingConsumer(t, s, 3)
	msg := event(newID(t).String())
	require.NoError(t, pubSub.Publish("orders", msg))
	r := s.parked(t, st, msg.UUID, 4)
	require.Equal(t, int64(4), runs.Load())
	require.Equal(t, 4, r.RetryCount, "the handler ran 4 times")

	again := message.NewMessage(msg.UUID, msg.Payload)
	again.Metadata.Set(oncebox.HeaderEventID, msg.Metadata.Get(oncebox.HeaderEventID))
	require.NoError(t, pubSub.Publish("orders", again))
	r2 := s.parked(t, st, msg.UUID, 8)
	require.Equal(t, r.ID, r2.ID, "a redelivery counts on the same row")
	require.Equal(t, int64(8), runs.Load())
}

// retryAndTransfer sets row id TO_RETRY and runs the dlq-retry job's
// statement: the row goes back to the outbox.
func (s *suite) retryAndTransfer(t *testing.T, st *dlq.Store, id oncebox.EventID) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.SetStatus(ctx, id, oncebox.DLQStatusToRetry))
	n, err := s.Dialect.TransferDLQToOutbox(ctx, s.Beginner, s.clock.Now(), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = st.Get(ctx, id)
	require.ErrorIs(t, err, dlq.ErrNotFound, "back in the outbox")
}

// An event retried from the DLQ that fails again is parked again under
// the same DLQ id, on both sides: a publisher row's id is the event id; a
// consumer row's is derived from (handler, event id), or (handler, message
// UUID) for a message without an event id, whose retry sends it under that
// row id. Before, every parking of a consumer row drew a new UUIDv7.
func testDLQReparkedEventKeepsItsDLQID(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	st := s.store(t)
	ctx := context.Background()

	t.Run("publisher", func(t *testing.T) {
		ids := s.publish(t, s.clock, "order-created", 1)
		s.failAll(t)
		require.Equal(t, 1, s.moveAll(t))
		r, err := st.Get(ctx, ids[0])
		require.NoError(t, err)
		s.retryAndTransfer(t, st, r.ID)
		s.failAll(t)
		require.Equal(t, 1, s.moveAll(t))
		r2, err := st.Get(ctx, ids[0])
		require.NoError(t, err, "parked again under the event id")
		require.Equal(t, r.ID, r2.ID)
		require.NoError(t, st.Delete(ctx, r2.ID))
		s.exec(t, "DELETE FROM "+s.Tables.Events)
	})

	pubSub, _ := failingConsumer(t, s, 0)
	// deliver publishes what the relay sends for the outbox row of
	// eventID: the parked message's UUID and payload, under eventID.
	deliver := func(t *testing.T, uuid string, eventID oncebox.EventID) {
		t.Helper()
		var (
			payload []byte
			n       int
		)
		require.NoError(t, s.DB.QueryRowContext(ctx, "SELECT payload, COUNT(*) OVER () FROM "+s.Tables.Events+" WHERE id = "+s.P(1),
			s.ID(eventID)).Scan(&payload, &n))
		require.Equal(t, 1, n, "the retried event is in the outbox under its id")
		msg := message.NewMessage(uuid, payload)
		msg.Metadata.Set(oncebox.HeaderEventID, eventID.String())
		require.NoError(t, pubSub.Publish("orders", msg))
	}

	t.Run("consumer, with an event id", func(t *testing.T) {
		msg := event(newID(t).String())
		require.NoError(t, pubSub.Publish("orders", msg))
		r := s.parked(t, st, msg.UUID, 1)
		s.retryAndTransfer(t, st, r.ID)
		deliver(t, msg.UUID, *r.EventID)
		r2 := s.parked(t, st, msg.UUID, 1)
		require.Equal(t, r.ID, r2.ID, "parked again under the same DLQ id")
		require.Equal(t, *r.EventID, *r2.EventID)
	})

	t.Run("consumer, without an event id", func(t *testing.T) {
		msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":"o-2"}`))
		require.NoError(t, pubSub.Publish("orders", msg))
		r := s.parked(t, st, msg.UUID, 1)
		require.Nil(t, r.EventID)
		s.retryAndTransfer(t, st, r.ID)
		deliver(t, msg.UUID, r.ID) // the retry sent it under the row's id
		r2 := s.parked(t, st, msg.UUID, 1)
		require.Equal(t, r.ID, r2.ID, "parked again under the same DLQ id")
	})
}
