package publisher_test

import (
	"context"
	"sync"
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

// fakeUsage is a Config.WakeQueueUsage reading a value the test sets, and
// counting its readings.
type fakeUsage struct {
	mu       sync.Mutex
	usage    float64
	readings int
}

func (f *fakeUsage) set(u float64) { f.mu.Lock(); f.usage = u; f.mu.Unlock() }

func (f *fakeUsage) read(context.Context, wsql.ContextExecutor) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readings++
	return f.usage, nil
}

func (f *fakeUsage) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.readings }

// Above WakeQueueLimit of PostgreSQL's notification queue the publisher
// adds no pg_notify (a full queue would fail every notifying transaction at
// COMMIT); below it, it notifies again. The usage is read at most once per
// WakeQueueCheck, not per transaction.
func TestNoNotificationWhileTheQueueIsOverItsLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	next := b.listen(t)
	usage := &fakeUsage{usage: publisher.DefaultWakeQueueLimit}
	cfg := b.config
	cfg.WakeQueueUsage = usage.read

	b.trace.Reset()
	b.publishIn(t, cfg, true, "order-created") // reads 0.5: at the limit
	b.clock.Advance(time.Second)
	b.publishIn(t, cfg, true, "invoice-paid") // the cached reading
	require.Equal(t, 1, usage.count(), "one reading per WakeQueueCheck")
	for _, s := range b.trace.Statements() {
		require.NotEqual(t, "SELECT pg_notify($1, $2)", s)
	}

	usage.set(0.49)
	b.clock.Advance(publisher.DefaultWakeQueueCheck - time.Second - time.Nanosecond)
	b.publishIn(t, cfg, true, "order-created") // still the old reading
	b.clock.Advance(time.Nanosecond)
	b.publishIn(t, cfg, true, "marker") // reads 0.49: notifies again
	require.Equal(t, 2, usage.count())
	require.Equal(t, "marker", next(), "nothing was notified above the limit")

	// A negative limit never reads the usage.
	cfg.WakeQueueLimit = -1
	usage.set(1)
	b.clock.Advance(publisher.DefaultWakeQueueCheck)
	b.publishIn(t, cfg, true, "order-created")
	require.Equal(t, 2, usage.count())
	require.Equal(t, "order-created", next())
}

// The default reading is pg_notification_queue_usage() through the
// caller's transaction.
func TestReadQueueUsageReadsThroughTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.inTx(t, false, func(tx pgx.Tx) error {
		u, err := publisher.ReadQueueUsage(b.schema.Dialect)(context.Background(), wsql.TxFromPgx(tx))
		require.NoError(t, err)
		require.GreaterOrEqual(t, u, 0.0)
		require.Less(t, u, publisher.DefaultWakeQueueLimit)
		return nil
	}))
}

// PostgreSQL refuses PREPARE TRANSACTION in a transaction that ran NOTIFY,
// so a publish in a transaction committed in two phases needs
// DisableWakeOnCommit. Where the server has max_prepared_transactions = 0,
// PREPARE TRANSACTION is refused whatever ran before it: the test then
// checks that the refusal is that one, and that with the wake-up off no
// pg_notify was run; it logs that the prepare itself was not tried.
func TestTwoPhaseCommitNeedsTheWakeUpOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var maxPrepared int
	require.NoError(t, b.schema.Pool.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&maxPrepared))
	const disabled = "prepared transactions are disabled"

	prepare := func(cfg publisher.Config, gid string) (notifies int, err error) {
		tx, err := b.schema.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), cfg, nil)
		require.NoError(t, err)
		b.trace.Reset()
		require.NoError(t, pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), []byte(`{}`))))
		for _, s := range b.trace.Statements() {
			if s == "SELECT pg_notify($1, $2)" {
				notifies++
			}
		}
		_, err = tx.Exec(ctx, "PREPARE TRANSACTION '"+gid+"'")
		return notifies, err
	}
	gid := b.schema.Name + "-2pc"

	// The wake-up on: the prepare is refused.
	notifies, err := prepare(b.config, gid+"-on")
	require.Equal(t, 1, notifies)
	require.Error(t, err)
	if maxPrepared > 0 {
		require.ErrorContains(t, err, "cannot PREPARE a transaction that has executed LISTEN, UNLISTEN, or NOTIFY")
	} else {
		require.ErrorContains(t, err, disabled)
	}

	// The wake-up off: nothing notified, and the prepare goes through.
	off := b.config
	off.DisableWakeOnCommit = true
	notifies, err = prepare(off, gid+"-off")
	require.Zero(t, notifies)
	if maxPrepared == 0 {
		require.ErrorContains(t, err, disabled)
		t.Logf("max_prepared_transactions = 0 on this server: PREPARE TRANSACTION is refused whatever the transaction ran; checked that no pg_notify ran with DisableWakeOnCommit")
		return
	}
	require.NoError(t, err)
	_, err = b.schema.Pool.Exec(ctx, "COMMIT PREPARED '"+gid+"-off'")
	require.NoError(t, err)
	require.Equal(t, 1, b.events(t))
}

// The default reading of the queue's usage runs in the caller's
// transaction: should it fail, a PostgreSQL transaction would be aborted
// and the business write with it. It runs under a savepoint: the failed
// reading is rolled back, the events commit, and that transaction sends no
// notification (the relay polls). Not parallel: it replaces the default
// reading of the package.
func TestAFailedQueueReadingDoesNotFailTheWrite(t *testing.T) {
	b := setup(t)
	restore := publisher.SetDefaultQueueUsage(func(ctx context.Context, tx wsql.ContextExecutor) (float64, error) {
		_, err := tx.ExecContext(ctx, "SELECT 1/0") // aborts a transaction outside a savepoint
		return 0, err
	})
	defer restore()
	b.trace.Reset()
	b.publishIn(t, b.config, true, "order-created")
	require.Equal(t, 1, b.events(t), "the event committed")
	statements := b.trace.Statements()
	require.Contains(t, statements, "ROLLBACK TO SAVEPOINT oncebox_wake_queue_usage")
	require.NotContains(t, statements, "SELECT pg_notify($1, $2)")
}

// The notification queue filling up is logged at ERROR with an error that
// names the usage and the limit (it was logged with err=<nil>).
func TestQueueFillingUpIsLoggedWithAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config
	cfg.WakeQueueUsage = (&fakeUsage{usage: 0.75}).read
	logs := watermill.NewCaptureLogger()
	require.NoError(t, b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), cfg, logs)
		require.NoError(t, err)
		return pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), []byte(`{}`)))
	}))
	errs := logs.Captured()[watermill.ErrorLogLevel]
	require.Len(t, errs, 1)
	require.Error(t, errs[0].Err, "logged at ERROR without an error: %q", errs[0].Msg)
	require.ErrorContains(t, errs[0].Err, "0.75")
	require.ErrorContains(t, errs[0].Err, "0.5")
}
