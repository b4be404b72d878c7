package subscriber_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/subscriber"
)

// Two router handlers on one topic filter through one BatchInbox, given
// msg.Context(): each records the ids under its own name, so each keeps
// every event once, as the middleware inbox does; HandlerNamespaces pins one
// to the namespace "" of the ids recorded before.
func TestBatchInboxNamespaceIsTheHandlersName(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	batch := subscriber.BatchInbox{Dialect: s.Dialect}
	key := event(t, "").Metadata.Get(oncebox.HeaderEventID)

	var mu sync.Mutex
	kept, calls := map[string]int{}, 0
	filterAs := func(b subscriber.BatchInbox, name string) message.NoPublishHandlerFunc {
		return func(msg *message.Message) error {
			tx, err := s.Pool.Begin(msg.Context())
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			fresh, err := b.FilterNew(msg.Context(), wsql.TxFromPgx(tx), []*message.Message{msg, msg.Copy()})
			if err != nil {
				return err
			}
			if err := tx.Commit(msg.Context()); err != nil {
				return err
			}
			mu.Lock()
			kept[name] += len(fresh)
			calls++
			mu.Unlock()
			return nil
		}
	}
	run := func(handlers map[string]message.NoPublishHandlerFunc) {
		pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
		defer func() { _ = pubSub.Close() }()
		router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
		require.NoError(t, err)
		for name, h := range handlers {
			router.AddConsumerHandler(name, "orders", pubSub, h)
		}
		done := make(chan error, 1)
		go func() { done <- router.Run(context.Background()) }()
		<-router.Running()
		mu.Lock()
		calls = 0
		mu.Unlock()
		for range 2 { // the event and a redelivery
			require.NoError(t, pubSub.Publish("orders", event(t, key)))
		}
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return calls == 2*len(handlers)
		}, 10*time.Second, 5*time.Millisecond, "every handler got both deliveries")
		require.NoError(t, router.Close())
		require.NoError(t, <-done)
	}

	run(map[string]message.NoPublishHandlerFunc{"ship": filterAs(batch, "ship"), "email": filterAs(batch, "email")})
	require.Equal(t, map[string]int{"ship": 1, "email": 1}, kept, "each handler keeps the event once")
	require.Equal(t, 1, s.Count(t, s.Dialect.Tables().Inbox, "consumer = 'ship'"))
	require.Equal(t, 1, s.Count(t, s.Dialect.Tables().Inbox, "consumer = 'email'"))

	// Outside a router handler, the namespace is "" (or Namespace).
	tx, err := s.Pool.Begin(context.Background())
	require.NoError(t, err)
	fresh, err := batch.RecordNew(context.Background(), wsql.TxFromPgx(tx), []string{key})
	require.NoError(t, err)
	require.True(t, fresh[key])
	require.NoError(t, tx.Commit(context.Background()))

	pinned := subscriber.BatchInbox{Dialect: s.Dialect, HandlerNamespaces: map[string]string{"sms": ""}}
	run(map[string]message.NoPublishHandlerFunc{"sms": filterAs(pinned, "sms")})
	require.Zero(t, kept["sms"], "pinned to '': the id recorded there is found")
}
