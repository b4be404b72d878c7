package postgres_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgcluster"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/service"
)

// The failover test's relays: batch size and batches in flight. The
// at-least-once bound of a failover (docs/postgresql.md, "Failover"): a
// batch sent whose finalize was cut by the failover stays IN_PROCESS and
// is sent again once recovered, so at most relays × failoverInFlight ×
// failoverBatch events arrive twice; no live batch is resent, since the
// failover (a few seconds) is shorter than HeartbeatTimeout (12s).
const (
	failoverRelays   = 2
	failoverBatch    = 20
	failoverInFlight = 3
)

// TestFailoverToASynchronousReplica: a producer and two relays (one of
// them the consumer, through the inbox) run on a multi-host DSN
// (target_session_attrs=read-write) against a primary with a synchronous
// streaming replica. Mid-run the primary crashes (stopped in immediate
// mode) and the replica is promoted (pg_ctl promote). The producer's
// acknowledged commits are all on the new primary; the relays and the
// listener reconnect to it; every event committed (the SQL checker: the
// outbox's rows on the new primary) is handled exactly once (the handler's
// rows, written in the inbox's transaction); the events that reached the
// consumer twice are within the bound above.
func TestFailoverToASynchronousReplica(t *testing.T) {
	c := pgcluster.New(t, pgcluster.Options{Sync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	setup := newPool(t, c.PrimaryDSN, "", 2)
	_, err := setup.Exec(ctx, "CREATE TABLE handled (event_id text NOT NULL, at timestamptz NOT NULL DEFAULT now())")
	require.NoError(t, err)
	setup.Close()

	cfg := serviceConfig(t, "100ms", "2s", "24h", failoverBatch)
	relayCfg := poller.Config{MaxBatchesInFlight: failoverInFlight}
	broker := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	defer func() { require.NoError(t, broker.Close()) }()

	// Relay A consumes too: the handler writes a row per event in the
	// inbox's transaction, so a handling counts only if it committed.
	logA, logB := watermill.NewCaptureLogger(), watermill.NewCaptureLogger()
	poolA := newPool(t, c.FailoverDSN, "", 10)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, logA)
	require.NoError(t, err)
	var arrived atomic.Int64 // before the inbox: every delivery
	router.AddMiddleware(func(next message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			arrived.Add(1)
			return next(msg)
		}
	})
	svcA, err := service.New(wsql.BeginnerFromPgx(poolA), cfg, logA,
		service.WithRelay(broker), service.WithRouter(router), service.WithRelayConfig(relayCfg))
	require.NoError(t, err)
	_, err = svcA.AddPgxHandler(router, "consume", topic, broker, func(ctx context.Context, tx pgx.Tx, msg *message.Message) error {
		_, err := tx.Exec(ctx, "INSERT INTO handled (event_id) VALUES ($1)", msg.Metadata.Get(oncebox.HeaderEventID))
		return err
	})
	require.NoError(t, err)
	require.NoError(t, svcA.Migrate(ctx))
	poolB := newPool(t, c.FailoverDSN, "", 10)
	svcB := newRelay(t, poolB, broker, cfg, relayCfg, logB)
	startService(t, svcA)
	startService(t, svcB)

	// The producer publishes one event per transaction until told to stop,
	// retrying through the failover; acked holds the ids whose commit
	// returned without error.
	producer := newPool(t, c.FailoverDSN, "", 4)
	var (
		mu    sync.Mutex
		acked []string
		fails int
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id, err := publishOne(ctx, svcA, producer, i)
			mu.Lock()
			if err != nil {
				fails++
			} else {
				acked = append(acked, id)
			}
			mu.Unlock()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 30*time.Second, "200 events acknowledged before the failover", func() bool { return ackedNow() >= 200 })

	failStart := time.Now()
	c.StopPrimary(t, "immediate")
	c.Promote(t)
	before := ackedNow()
	waitFor(t, 30*time.Second, "the producer writes again after the failover", func() bool { return ackedNow() >= before+20 })
	t.Logf("failover: primary stopped, replica promoted, producer writing again in %s (%d events acknowledged before)",
		time.Since(failStart).Round(time.Millisecond), before)
	waitFor(t, 30*time.Second, "200 more events after the failover", func() bool { return ackedNow() >= before+200 })
	close(stop)
	<-done

	// The SQL checker, on the new primary.
	check := newPool(t, c.FailoverDSN, "", 2)
	committedIDs := func() map[string]bool {
		rows, err := check.Query(ctx, "SELECT id::text FROM outbox_events")
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		m := make(map[string]bool, len(ids))
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	var handled, distinct, committed int
	waitFor(t, 60*time.Second, "every committed event handled", func() bool {
		require.NoError(t, check.QueryRow(ctx, "SELECT count(*), count(DISTINCT event_id) FROM handled").Scan(&handled, &distinct))
		require.NoError(t, check.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&committed))
		return distinct >= committed
	})
	all := committedIDs()
	mu.Lock()
	var lost []string
	for _, id := range acked {
		if !all[id] {
			lost = append(lost, id)
		}
	}
	nAcked, nFails := len(acked), fails
	mu.Unlock()
	require.Empty(t, lost, "commits acknowledged by the old primary missing on the new one (the replica was synchronous)")
	require.Equal(t, committed, distinct, "events handled ≠ events committed")
	require.Equal(t, distinct, handled, "an event was handled twice: the inbox let a duplicate through")
	var notHandled int
	require.NoError(t, check.QueryRow(ctx,
		"SELECT count(*) FROM outbox_events e WHERE NOT EXISTS (SELECT 1 FROM handled h WHERE h.event_id = e.id::text)").Scan(&notHandled))
	require.Zero(t, notHandled, "committed events never handled")
	var notProcessed int
	waitFor(t, 20*time.Second, "every row PROCESSED", func() bool {
		require.NoError(t, check.QueryRow(ctx, "SELECT count(*) FROM outbox_events WHERE status <> 'PROCESSED'").Scan(&notProcessed))
		return notProcessed == 0
	})
	dups := int(arrived.Load()) - handled
	t.Logf("failover: %d committed (%d acknowledged, %d failed publishes), %d handled once, %d arrived twice (bound %d)",
		committed, nAcked, nFails, handled, dups, failoverRelays*failoverInFlight*failoverBatch)
	require.LessOrEqual(t, dups, failoverRelays*failoverInFlight*failoverBatch, "more duplicates than the batches in flight at the failover")

	// Each relay's listener came back on the new primary: LISTEN in effect
	// once at start and once more after the failover.
	for name, l := range map[string]*watermill.CaptureLoggerAdapter{"A": logA, "B": logB} {
		require.GreaterOrEqual(t, countLogged(l, "Listening for wake-ups on commit"), 2, "relay %s's listener did not come back", name)
	}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countLogged(l *watermill.CaptureLoggerAdapter, msg string) int {
	n := 0
	for _, ms := range l.Captured() {
		for _, m := range ms {
			if strings.HasPrefix(m.Msg, msg) {
				n++
			}
		}
	}
	return n
}
