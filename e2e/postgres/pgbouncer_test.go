package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgcluster"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/service"
)

// TestThroughPgBouncerTransactionPooling: the publisher, the relay, its
// jobs and the inbox work through PgBouncer 1.18 in transaction pooling
// with pgx in QueryExecModeExec (docs/postgresql.md, "PgBouncer"), and the
// relay's listener, on a direct connection to the server, wakes it on
// commit: the polling delay is 30s, so only the wake-ups can relay the
// events within the test's 20s (the same events stay unrelayed for 20s
// when the listener goes through PgBouncer: the LISTEN is lost with the
// server connection it ran on). Every event committed is handled once; the
// clean-up job, under its lease, then deletes them; nothing logs an error.
func TestThroughPgBouncerTransactionPooling(t *testing.T) {
	c := pgcluster.New(t, pgcluster.Options{PgBouncer: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newPool(t, c.PgBouncerDSN, "exec", 10)
	direct := newPool(t, c.PrimaryDSN, "", 2)
	logger := watermill.NewCaptureLogger()
	broker := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, logger)
	defer func() { require.NoError(t, broker.Close()) }()
	l := newLedger()
	dh := newTimeline()
	svc := newConsumer(t, pool, broker, serviceConfig(t, "30s", "30s", "1s", 200), poller.Config{
		Listener: poller.PgxListener(direct),
		CleanUp:  poller.Schedule{Min: 200 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 1},
	}, l, logger, service.WithHooks(service.Hooks{Poller: dh}))
	require.NoError(t, svc.Migrate(ctx))
	startService(t, svc)
	defer func() {
		if t.Failed() {
			dh.logTail(t, 60)
			rows, err := direct.Query(ctx, "SELECT id::text, status, created_at FROM outbox_events WHERE status <> 'PROCESSED'")
			if err != nil {
				return
			}
			defer rows.Close()
			for rows.Next() {
				var id, status string
				var at time.Time
				if rows.Scan(&id, &status, &at) == nil {
					t.Log("not processed:", id, status, at)
				}
			}
		}
	}()

	const producers, each = 4, 100
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id, err := publishOne(ctx, svc, pool, p*each+i)
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, ids, producers*each)
	// The publishers notify at most once per WakeLimit (5ms) per type: an
	// event whose commit relied on another's notification may wait for the
	// follow-up poll min-fixed-delay (30s) later (publisher/notify.go). One
	// more event, well after the burst, notifies, and the poll it wakes
	// claims every row committed before.
	time.Sleep(50 * time.Millisecond)
	dh.add("last publish")
	last, err := publishOne(ctx, svc, pool, producers*each)
	require.NoError(t, err)
	dh.add("last committed " + last)
	ids = append(ids, last)
	waitHandled(t, l, len(ids), 20*time.Second)
	require.Zero(t, l.check(t, ids), "no failure was injected: no event should arrive twice")

	// The clean-up deletes the PROCESSED rows (ttl 1s) through PgBouncer.
	require.Eventually(t, func() bool {
		var n int
		err := direct.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&n)
		return err == nil && n == 0
	}, 20*time.Second, 100*time.Millisecond, "the clean-up job did not delete the processed rows")
	noErrors(t, logger)
}

// assertNoError records err as the test's failure (from any goroutine)
// and reports whether there was none.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("%v", err)
		return false
	}
	return true
}

// TestListenerThroughPgBouncerFallsBackToPolling: without a direct
// connection for its listener, the relay's LISTEN goes through PgBouncer in
// transaction pooling, where it cannot work (the server connection it ran
// on goes back to PgBouncer's pool with the statement). The listener's
// probe notification never arrives: the relay says so in one ERROR line
// (poller.ErrListenerDeaf), never listens, and relays by polling.
func TestListenerThroughPgBouncerFallsBackToPolling(t *testing.T) {
	c := pgcluster.New(t, pgcluster.Options{PgBouncer: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newPool(t, c.PgBouncerDSN, "exec", 10)
	logger := watermill.NewCaptureLogger()
	broker := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, logger)
	defer func() { require.NoError(t, broker.Close()) }()
	l := newLedger()
	hooks := &wakeRecorder{}
	svc := newConsumer(t, pool, broker, serviceConfig(t, "100ms", "500ms", "24h", 200), poller.Config{}, l, logger,
		service.WithHooks(service.Hooks{Poller: hooks}))
	require.NoError(t, svc.Migrate(ctx))
	startService(t, svc)

	var ids []string
	for i := range 20 {
		id, err := publishOne(ctx, svc, pool, i)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	waitHandled(t, l, len(ids), 20*time.Second)
	require.Zero(t, l.check(t, ids))
	waitFor(t, 15*time.Second, "the listener's fall-back logged", func() bool {
		return countLogged(logger, "Wake-up on commit is off") > 0
	})
	time.Sleep(time.Second) // a retry would log again within ListenerBackoff's first 100ms
	errs := logger.Captured()[watermill.ErrorLogLevel]
	require.Len(t, errs, 1, "one ERROR line, the fall-back's")
	require.ErrorIs(t, errs[0].Err, poller.ErrListenerDeaf)
	require.Zero(t, countLogged(logger, "Listening for wake-ups on commit"), "the deaf listener was taken for a working one")
	// What the metrics (oncebox_relay_listener_up, …_down_total{reason="deaf"}) are fed.
	ups, downs := hooks.calls()
	require.Zero(t, ups, "WakeHooks.ListenerUp for a deaf listener")
	require.Len(t, downs, 1, "one WakeHooks.ListenerDown")
	require.ErrorIs(t, downs[0], poller.ErrListenerDeaf)
}

// wakeRecorder records the relay's WakeHooks calls.
type wakeRecorder struct {
	poller.NopHooks
	mu    sync.Mutex
	ups   int
	downs []error
}

func (w *wakeRecorder) Woken(string, poller.WakeTarget) {}
func (w *wakeRecorder) ListenerUp()                     { w.mu.Lock(); w.ups++; w.mu.Unlock() }
func (w *wakeRecorder) ListenerDown(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.downs = append(w.downs, err)
}

func (w *wakeRecorder) calls() (int, []error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ups, append([]error(nil), w.downs...)
}
