package subscriber_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/subscriber"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func event(t *testing.T, key string) *message.Message {
	t.Helper()
	if key == "" {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		key = id.String()
	}
	msg := message.NewMessage(watermill.NewUUID(), []byte("p"))
	msg.Metadata.Set(oncebox.HeaderEventID, key)
	return msg
}

func TestInboxSubscriberDropsDuplicatesAndCommitsOnAck(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := s.Pool.Exec(ctx, "CREATE TABLE "+s.Name+".effects (event_id text)")
	require.NoError(t, err)

	pubSub := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 16}, watermill.NopLogger{})
	inbox, err := middleware.NewInbox(s.Beginner, middleware.InboxConfig{Dialect: s.Dialect}, nil)
	require.NoError(t, err)
	sub, err := subscriber.NewInboxSubscriber(pubSub, inbox, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Close()) }()
	msgs, err := sub.Subscribe(ctx, "orders")
	require.NoError(t, err)

	a, b := event(t, ""), event(t, "")
	require.NoError(t, pubSub.Publish("orders", a, a.Copy(), b, a.Copy(), b.Copy()))

	var got []string
	nacked := false
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case m := <-msgs:
			key := m.Metadata.Get(oncebox.HeaderEventID)
			tx, ok := middleware.PgxTxFromContext(m.Context())
			require.True(t, ok, "the consumer gets the inbox's transaction")
			_, err := tx.Exec(m.Context(), "INSERT INTO "+s.Name+".effects VALUES ($1)", key)
			require.NoError(t, err)
			if key == b.Metadata.Get(oncebox.HeaderEventID) && !nacked {
				nacked = true
				m.Nack() // rolled back with the id: b comes again
				continue
			}
			got = append(got, key)
			m.Ack()
		case <-timeout:
			t.Fatalf("got %v", got)
		}
	}
	require.ElementsMatch(t, []string{a.Metadata.Get(oncebox.HeaderEventID), b.Metadata.Get(oncebox.HeaderEventID)}, got)
	select {
	case m := <-msgs:
		t.Fatalf("a duplicate came through: %s", m.Metadata.Get(oncebox.HeaderEventID))
	case <-time.After(200 * time.Millisecond):
	}
	require.Equal(t, 2, s.Count(t, s.Name+".effects", ""), "the nacked attempt's write rolled back")
	require.Equal(t, 2, s.Count(t, s.Dialect.Tables().Inbox, ""))
}
