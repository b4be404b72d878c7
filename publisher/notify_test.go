package publisher_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// listen opens a connection listening on the tables' channel and returns a
// function giving the payload of the next notification.
func (b *testBundle) listen(t *testing.T) func() string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.schema.Pool.Config().ConnString())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	channel := dialects.NotifyChannel(b.schema.Dialect.Tables())
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	return func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, err := conn.WaitForNotification(ctx)
		require.NoError(t, err)
		require.Equal(t, channel, n.Channel)
		return n.Payload
	}
}

// publishIn publishes one event of each type in one transaction and
// commits it or rolls it back.
func (b *testBundle) publishIn(t *testing.T, cfg publisher.Config, commit bool, types ...string) {
	t.Helper()
	require.NoError(t, b.inTx(t, commit, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), cfg, nil)
		require.NoError(t, err)
		for _, et := range types {
			if err := pub.Publish(et, message.NewMessage(watermill.NewUUID(), []byte(`{}`))); err != nil {
				return err
			}
		}
		return nil
	}))
}

// Notifications arrive in commit order, so each test ends with a marker
// transaction: when its notification is the next one, nothing was sent in
// between.

// A transaction that rolls back notifies nobody.
func TestRolledBackTransactionSendsNoNotification(t *testing.T) {
	t.Parallel()
	b := setup(t)
	next := b.listen(t)
	b.publishIn(t, b.config, false, "order-created")
	b.publishIn(t, b.config, true, "marker")
	require.Equal(t, "marker", next())
}

// The limiter skips a second notification of a type within WakeLimit, and
// lets the next one through once WakeLimit has passed; other types are not
// held back. One transaction notifies each type once.
func TestLimiterSkipsANotificationWithinTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	next := b.listen(t)
	b.publishIn(t, b.config, true, "order-created", "order-created") // notifies once
	b.publishIn(t, b.config, true, "order-created")                  // skipped: same instant
	b.publishIn(t, b.config, true, "invoice-paid")                   // another type
	b.clock.Advance(publisher.DefaultWakeLimit - time.Nanosecond)
	b.publishIn(t, b.config, true, "order-created") // still within the window
	b.clock.Advance(time.Nanosecond)
	b.publishIn(t, b.config, true, "order-created") // the window has passed
	b.publishIn(t, b.config, true, "marker")
	require.Equal(t, []string{"order-created", "invoice-paid", "order-created", "marker"},
		[]string{next(), next(), next(), next()})
}

// One transaction notifies each type at most once, even with the limiter
// off; DisableWakeOnCommit sends nothing.
func TestOneNotificationPerTypePerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config
	cfg.WakeLimit = -1
	require.NoError(t, b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), cfg, nil)
		require.NoError(t, err)
		b.trace.Reset()
		for range 3 {
			require.NoError(t, pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), []byte(`{}`))))
		}
		notifies := 0
		for _, s := range b.trace.Statements() {
			if s == "SELECT pg_notify($1, $2)" {
				notifies++
			}
		}
		require.Equal(t, 1, notifies)
		return nil
	}))

	next := b.listen(t)
	off := b.config
	off.DisableWakeOnCommit = true
	b.publishIn(t, off, true, "order-created")
	b.publishIn(t, cfg, true, "marker")
	require.Equal(t, "marker", next())
}
