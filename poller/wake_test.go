package poller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// wakeHooks records the poller's polls and its wake-ups.
type wakeHooks struct {
	hooks
	mu    sync.Mutex
	ups   int
	downs []error
	woken []string // "type→target", in order
	usage []float64
}

func (h *wakeHooks) NotifyQueueUsage(ratio float64) {
	h.mu.Lock()
	h.usage = append(h.usage, ratio)
	h.mu.Unlock()
}

func (h *wakeHooks) readings() []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]float64(nil), h.usage...)
}

func (h *wakeHooks) Woken(eventType string, target poller.WakeTarget) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.woken = append(h.woken, fmt.Sprintf("%s→%d", eventType, target))
}

func (h *wakeHooks) ListenerUp() {
	h.mu.Lock()
	h.ups++
	h.mu.Unlock()
}

func (h *wakeHooks) ListenerDown(err error) {
	h.mu.Lock()
	h.downs = append(h.downs, err)
	h.mu.Unlock()
}

func (h *wakeHooks) state() (ups, downs int, woken []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ups, len(h.downs), append([]string(nil), h.woken...)
}

func (h *wakeHooks) pollsOf(eventType string) int {
	n := 0
	for _, p := range h.Snapshot().Polls {
		if p.EventType == eventType {
			n++
		}
	}
	return n
}

func woke(eventType string, target poller.WakeTarget) string {
	return fmt.Sprintf("%s→%d", eventType, target)
}

// strictConfig is one configured type, no discovery, on b's fake clock.
func (b *bundle) strictConfig(h poller.Hooks, types ...string) poller.Config {
	cfg := b.config()
	cfg.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{}
	for _, t := range types {
		cfg.Oncebox.Outbox.Events[t] = oncebox.EventSettings{}
	}
	cfg.Oncebox.Outbox.StrictEventTypes = true
	cfg.Hooks = h
	return cfg
}

// settled waits until the listener is up, eventType's loop made its first
// poll and every loop sleeps on the fake clock (waiters of them), which
// from then on is never advanced.
func settled(t *testing.T, b *bundle, h *wakeHooks, eventType string, waiters int) {
	t.Helper()
	eventually(t, "listener up and first poll done", func() bool {
		ups, _, _ := h.state()
		return ups == 1 && h.pollsOf(eventType) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.clock.BlockUntilContext(ctx, waiters))
}

// An event committed while its loop sleeps is relayed at once: the fake
// clock never moves, so without the wake-up it would never be sent.
func TestWakeOnCommitRelaysWhileTheLoopSleeps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	rec := newRecorder()
	p, err := poller.New(b.schema.Beginner, rec, b.strictConfig(h, "order-created"), nil)
	require.NoError(t, err)
	start(t, p)
	settled(t, b, h, "order-created", 3) // the loop, recovery, clean-up

	ids := b.publish(t, b.clock, "order-created", 1)
	eventually(t, "the event is relayed without the clock moving", func() bool { return rec.deliveries()[ids[0]] == 1 })
	_, _, woken := h.state()
	require.Equal(t, []string{woke("order-created", poller.WokeLoop)}, woken)
}

// startDiscovering runs a poller that polls order-created and discovers
// every other type, with polling as its defaults' pace (zero: the
// defaults), on b's fake clock, and returns once the listener is up, the
// first polls are done and every loop sleeps (4 waiters: the loop, the
// discovery, recovery, clean-up).
func startDiscovering(t *testing.T, b *bundle, polling oncebox.PollingSettings) (*wakeHooks, *recorder) {
	t.Helper()
	h := &wakeHooks{}
	rec := newRecorder()
	cfg := b.config() // discovers every type besides its own
	cfg.EventTypes = []string{"order-created"}
	cfg.Oncebox.Outbox.Defaults.Polling = polling
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "listener up, first polls done", func() bool {
		ups, _, _ := h.state()
		return ups == 1 && h.pollsOf("order-created") == 1 && h.pollsOf(poller.DiscoveryEventType) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 4))
	return h, rec
}

// A type nobody configured wakes the discovery, which starts its loop at
// once.
func TestWakeOnCommitStartsADiscoveredType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, rec := startDiscovering(t, b, oncebox.PollingSettings{})

	ids := b.publish(t, b.clock, "invoice-paid", 2)
	eventually(t, "the discovered type is relayed without the clock moving", func() bool {
		d := rec.deliveries()
		return d[ids[0]] == 1 && d[ids[1]] == 1
	})
	_, _, woken := h.state()
	require.Equal(t, woke("invoice-paid", poller.WokeDiscovery), woken[0])
}

// A discovered type's loop ends at its first empty poll; a commit just
// after it wakes the discovery, which starts the loop again at once, even
// though the discovery was woken moments before: a wake-driven query that
// started a type with work ends the discovery's run of empty ones. It was
// held the defaults' whole min-fixed-delay (30s here, the clock only
// moves 5ms: never relayed), which failed TestThroughPgBouncerTransactionPooling.
func TestWakeAfterADiscoveredLoopEndedStartsItAgainAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, rec := startDiscovering(t, b, oncebox.PollingSettings{MinFixedDelay: 30 * time.Second, MaxFixedDelay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first := b.publish(t, b.clock, "invoice-paid", 2)
	eventually(t, "the discovered type is relayed", func() bool {
		d := rec.deliveries()
		return d[first[0]] == 1 && d[first[1]] == 1
	})
	// A notification with nothing behind it: the loop's wake-driven poll
	// finds nothing and the loop ends.
	notifyFlood(t, b, h, 1, `'invoice-paid'`)
	eventually(t, "the discovered loop ended", func() bool {
		polls := 0
		for _, p := range h.Snapshot().Polls {
			if p.EventType == "invoice-paid" {
				polls++
				if p.Claimed == 0 {
					return true
				}
			}
		}
		return polls > 5
	})
	require.NoError(t, b.clock.BlockUntilContext(ctx, 4))
	_, _, w0 := h.state()
	// The publishers' limiter lets one notification per type through per
	// 5ms of the clock: the first publish's used this instant's.
	b.clock.Advance(5 * time.Millisecond)
	again := b.publish(t, b.clock, "invoice-paid", 1)
	defer func() {
		if t.Failed() {
			_, _, w := h.state()
			t.Log(w)
			for _, p := range h.Snapshot().Polls {
				t.Log(p.EventType, p.Claimed, p.NextDelay)
			}
		}
	}()
	eventually(t, "the commit after the loop ended is relayed, the clock moved 5ms only", func() bool {
		return rec.deliveries()[again[0]] == 1
	})
	_, _, woken := h.state()
	require.Equal(t, woke("invoice-paid", poller.WokeDiscovery), woken[len(w0)])
}

// A rolled-back transaction sends no notification, and the event of a
// transaction whose notification the limiter skipped (one went out just
// before, in the transaction that rolled back) waits for the loop's next
// poll at its current delay: the bound stated in docs/design.md.
func TestRolledBackNotificationWakesNothingAndTheSkippedOneWaitsOneDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	rec := newRecorder()
	p, err := poller.New(b.schema.Beginner, rec, b.strictConfig(h, "order-created"), nil)
	require.NoError(t, err)
	start(t, p)
	settled(t, b, h, "order-created", 3)
	ctx := context.Background()

	// A: notifies (the limiter's first), then rolls back.
	tx, err := b.schema.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: b.schema.Dialect, Clock: b.clock}, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), []byte(`{}`))))
	require.NoError(t, tx.Rollback(ctx))
	// B: same type, same instant on the publisher's clock: skipped; commits.
	ids := b.publish(t, b.clock, "order-created", 1)
	// C: another type (not polled here) is notified and commits last.
	// Notifications arrive in commit order, so once C's is in, A's or B's
	// would have been too.
	b.publish(t, b.clock, "audit", 1)
	eventually(t, "C's notification", func() bool {
		_, _, woken := h.state()
		return len(woken) > 0
	})
	_, _, woken := h.state()
	require.Equal(t, []string{woke("audit", poller.WokeNothing)}, woken, "a rolled-back transaction notifies nobody")
	require.Empty(t, rec.deliveries())

	// The loop's next poll, at its current delay (250ms after its first,
	// empty, poll), sends B's event.
	polls := h.Snapshot().Polls
	require.Equal(t, 250*time.Millisecond, polls[len(polls)-1].NextDelay)
	b.clock.Advance(250 * time.Millisecond)
	eventually(t, "B's event at the next poll", func() bool { return rec.deliveries()[ids[0]] == 1 })
}

// gatedListener is the pgx listener whose sessions after the first wait for
// the test to open the gate.
type gatedListener struct {
	poller.Listener
	mu       sync.Mutex
	sessions int
	gate     chan struct{}
}

func (g *gatedListener) Listen(ctx context.Context, channel string, ready func(), notify func(string)) error {
	g.mu.Lock()
	g.sessions++
	n := g.sessions
	g.mu.Unlock()
	if n > 1 {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil
		}
	}
	return g.Listener.Listen(ctx, channel, ready, notify)
}

// A listener connection killed by pg_terminate_backend: polling goes on at
// its pace, the listener comes back and wake-ups work again; no event is
// lost or sent twice.
func TestListenerReconnectsAfterTerminateBackend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	rec := newRecorder()
	cfg := b.strictConfig(h, "order-created")
	gl := &gatedListener{Listener: poller.PgxListener(b.schema.Pool), gate: make(chan struct{})}
	cfg.Listener = gl
	cfg.ListenerBackoff = poller.Schedule{Min: time.Millisecond, Max: time.Millisecond, Multiplier: 1}
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	start(t, p)
	settled(t, b, h, "order-created", 3)
	ctx := context.Background()

	channel := dialects.NotifyChannel(b.schema.Dialect.Tables())
	var killed bool
	require.NoError(t, b.schema.Pool.QueryRow(ctx,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN "`+channel+`"'`).Scan(&killed))
	require.True(t, killed)
	eventually(t, "the listener notices", func() bool { _, downs, _ := h.state(); return downs == 1 })

	// While it is down, polling goes on at its pace.
	first := b.publish(t, b.clock, "order-created", 1)
	stepUntil(t, b.clock, 3, 250*time.Millisecond, time.Minute, func() bool { return rec.deliveries()[first[0]] == 1 })

	// It comes back, and a commit wakes the loop again.
	close(gl.gate)
	eventually(t, "the listener is back", func() bool { ups, _, _ := h.state(); return ups == 2 })
	second := b.publish(t, b.clock, "order-created", 1)
	eventually(t, "woken again", func() bool { return rec.deliveries()[second[0]] == 1 })
	_, _, woken := h.state()
	require.Contains(t, woken, woke("order-created", poller.WokeLoop))
	require.Equal(t, map[string]int{first[0]: 1, second[0]: 1}, rec.deliveries())
	require.Zero(t, b.status(t, "PENDING"))
}

// Two services on one database, in different schemas, listen on different
// channels: neither is woken by the other's commits.
func TestTwoServicesDoNotWakeEachOther(t *testing.T) {
	t.Parallel()
	a, c := setup(t), setup(t)
	ha, hc := &wakeHooks{}, &wakeHooks{}
	pa, err := poller.New(a.schema.Beginner, newRecorder(), a.strictConfig(ha, "order-created"), nil)
	require.NoError(t, err)
	pc, err := poller.New(c.schema.Beginner, newRecorder(), c.strictConfig(hc, "order-created"), nil)
	require.NoError(t, err)
	start(t, pa)
	start(t, pc)
	settled(t, a, ha, "order-created", 3)
	settled(t, c, hc, "order-created", 3)

	// c's commit first (a type neither polls: the hooks still see it), then
	// a's: a receives notifications in commit order, so had it received
	// c's, it would be before its own.
	c.publish(t, c.clock, "c-only", 1)
	eventually(t, "c woken", func() bool { _, _, w := hc.state(); return len(w) == 1 })
	a.publish(t, a.clock, "order-created", 1)
	eventually(t, "a woken by its own commit", func() bool {
		_, _, w := ha.state()
		return len(w) > 0 && w[len(w)-1] == woke("order-created", poller.WokeLoop)
	})
	_, _, wa := ha.state()
	_, _, wc := hc.state()
	require.Equal(t, []string{woke("order-created", poller.WokeLoop)}, wa)
	require.Equal(t, []string{woke("c-only", poller.WokeNothing)}, wc)
	require.NotEqual(t, dialects.NotifyChannel(a.schema.Dialect.Tables()), dialects.NotifyChannel(c.schema.Dialect.Tables()))
}

// A pool that is not pgx (database/sql) gets no listener: polling only.
func TestNoListenerOverDatabaseSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	rec := newRecorder()
	p, err := poller.New(wsql.BeginnerFromStdSQL(b.schema.StdDB(t)), rec, b.strictConfig(h, "order-created"), nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "first poll", func() bool { return h.pollsOf("order-created") == 1 })
	ids := b.publish(t, b.clock, "order-created", 1)
	stepUntil(t, b.clock, 3, 250*time.Millisecond, time.Minute, func() bool { return rec.deliveries()[ids[0]] == 1 })
	ups, _, woken := h.state()
	require.Zero(t, ups)
	require.Empty(t, woken)
}

// notifyFlood sends n notifications on b's channel, each in a transaction
// of its own (identical notifications of one transaction are folded), the
// payload of the i-th being payload(i), and waits until the relay's
// listener has received them all.
func notifyFlood(t *testing.T, b *bundle, h *wakeHooks, n int, payload string) {
	t.Helper()
	_, _, before := h.state()
	channel := dialects.NotifyChannel(b.schema.Dialect.Tables())
	_, err := b.schema.Pool.Exec(context.Background(), fmt.Sprintf(`DO $$ BEGIN
		FOR i IN 1..%d LOOP PERFORM pg_notify('%s', %s); COMMIT; END LOOP; END $$`, n, channel, payload))
	require.NoError(t, err)
	eventually(t, "every notification received", func() bool {
		_, _, woken := h.state()
		return len(woken) == len(before)+n
	})
}

// Any role that can connect may NOTIFY the relay's channel: a flood of
// notifications naming a configured type with nothing to relay costs at
// most 2 + elapsed/min-fixed-delay wake-driven claims, and the
// wake-ups that came inside the window are served at its end, not dropped;
// a wake-driven claim that found events lets the next wake-up through at
// once.
func TestWakeUpFloodIsCoalescedPerMinFixedDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	rec := newRecorder()
	p, err := poller.New(b.schema.Beginner, rec, b.strictConfig(h, "order-created"), nil)
	require.NoError(t, err)
	start(t, p)
	settled(t, b, h, "order-created", 3) // the loop, recovery, clean-up

	// The clock does not move: the first two wake-ups are served at once
	// (two empty polls in a row are allowed: under real traffic a
	// notification often names an event the running poll claimed), the
	// 1,998 others wait for the end of the window.
	notifyFlood(t, b, h, 2000, `'order-created'`)
	ids := b.publish(t, b.clock, "order-created", 1) // woken inside the window too
	eventually(t, "its notification", func() bool { _, _, w := h.state(); return len(w) == 2001 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 3))
	require.LessOrEqual(t, h.pollsOf("order-created"), 3, "the first poll and two wake-driven polls")

	// At the end of the window the remembered wake-up polls once, and finds
	// the event.
	b.clock.Advance(250 * time.Millisecond)
	eventually(t, "the remembered wake-up is served", func() bool { return rec.deliveries()[ids[0]] == 1 })
	require.NoError(t, b.clock.BlockUntilContext(ctx, 3))
	require.LessOrEqual(t, h.pollsOf("order-created"), 4)

	// That poll claimed an event: real traffic, so the next commit is
	// relayed at once, the clock still frozen.
	more := b.publish(t, b.clock, "order-created", 1)
	eventually(t, "the next commit is relayed at once", func() bool { return rec.deliveries()[more[0]] == 1 })
}

// A genuine commit that follows two empty wake-driven polls (the tail of a
// burst: notifications of events an earlier poll already claimed) waits
// the first hold (10ms), not the whole window: with min-fixed-delay 30s (a
// relay that relies on LISTEN) it once waited 30s. The clock moves 10ms
// only: held for the window, the event is never sent.
func TestWakeAfterEmptyWakePollsWaitsTheHoldNotTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	rec := newRecorder()
	cfg := b.strictConfig(h, "order-created")
	cfg.Oncebox.Outbox.Events["order-created"] = oncebox.EventSettings{Polling: oncebox.PollingSettings{
		MinFixedDelay: 30 * time.Second, MaxFixedDelay: time.Minute}}
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	start(t, p)
	settled(t, b, h, "order-created", 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Two wake-driven polls that find nothing, served at once.
	for i := range 2 { // wakeEmptyRun
		notifyFlood(t, b, h, 1, `'order-created'`)
		eventually(t, "the empty wake-driven poll", func() bool { return h.pollsOf("order-created") == 2+i })
		require.NoError(t, b.clock.BlockUntilContext(ctx, 3))
	}
	_, _, w0 := h.state()
	ids := b.publish(t, b.clock, "order-created", 1)
	eventually(t, "its notification", func() bool { _, _, w := h.state(); return len(w) == len(w0)+1 })
	require.NoError(t, b.clock.BlockUntilContext(ctx, 3))
	b.clock.Advance(10 * time.Millisecond)
	eventually(t, "the event, after the first hold", func() bool { return rec.deliveries()[ids[0]] == 1 })
}

// Payloads that cannot name an event type (longer than MaxEventTypeLength)
// wake nothing; valid names of types nobody configured wake the discovery
// at most once per min-fixed-delay of the defaults.
func TestWakeUpFloodCostsTheDiscoveryNothingOrOneQueryPerMinFixedDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, _ := startDiscovering(t, b, oncebox.PollingSettings{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Random payloads, 256 bytes and more: no event type is that long.
	notifyFlood(t, b, h, 2000, `repeat(md5(random()::text), 8 + i % 3)`)
	require.NoError(t, b.clock.BlockUntilContext(ctx, 4))
	require.Equal(t, 1, h.pollsOf(poller.DiscoveryEventType), "no discovery query")
	_, _, woken := h.state()
	for _, w := range woken {
		require.True(t, strings.HasSuffix(w, woke("", poller.WokeNothing)), w)
	}

	// Random valid names: one discovery query at once, one at the end of the
	// window.
	notifyFlood(t, b, h, 2000, `'rnd-' || md5(random()::text)`)
	require.NoError(t, b.clock.BlockUntilContext(ctx, 4))
	require.LessOrEqual(t, h.pollsOf(poller.DiscoveryEventType), 2)
	b.clock.Advance(250 * time.Millisecond)
	eventually(t, "the remembered wake-up is served", func() bool { return h.pollsOf(poller.DiscoveryEventType) >= 3 })
	require.NoError(t, b.clock.BlockUntilContext(ctx, 4))
	require.LessOrEqual(t, h.pollsOf(poller.DiscoveryEventType), 3)
}

// The relay reads the notification queue's usage on its listener's
// connection once the LISTEN is in effect, and reports it to the hooks.
func TestRelayReportsTheNotificationQueueUsage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	p, err := poller.New(b.schema.Beginner, newRecorder(), b.strictConfig(h, "order-created"), nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "a reading", func() bool { return len(h.readings()) == 1 })
	u := h.readings()[0]
	require.GreaterOrEqual(t, u, 0.0)
	require.Less(t, u, 0.5)
}

// While notifications arrive, PgxListener reads the queue's usage at most
// once per every, between two waits, and no notification is lost to a
// reading.
func TestPgxListenerReadsTheQueueUsageWhileNotified(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qw, ok := poller.PgxListener(b.schema.Pool).(poller.QueueWatcher)
	require.True(t, ok)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu       sync.Mutex
		payloads []string
		readings int
	)
	ready := make(chan struct{})
	done := make(chan error, 1)
	channel := dialects.NotifyChannel(b.schema.Dialect.Tables())
	go func() {
		done <- qw.ListenAndWatch(ctx, channel, time.Millisecond, func() { close(ready) },
			func(p string) { mu.Lock(); payloads = append(payloads, p); mu.Unlock() },
			func(float64) { mu.Lock(); readings++; mu.Unlock() })
	}()
	defer func() { cancel(); require.NoError(t, <-done) }()
	<-ready
	for i := range 20 {
		_, err := b.schema.Pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, fmt.Sprint(i))
		require.NoError(t, err)
		// More than every between two notifications: a reading is due
		// at each wait (sent back to back, all 20 could arrive within
		// one millisecond, after the first reading: the test failed so).
		time.Sleep(3 * time.Millisecond)
	}
	eventually(t, "every notification", func() bool { mu.Lock(); defer mu.Unlock(); return len(payloads) == 20 })
	mu.Lock()
	defer mu.Unlock()
	for i, p := range payloads {
		require.Equal(t, fmt.Sprint(i), p)
	}
	require.GreaterOrEqual(t, readings, 2, "the first reading and at least one while notified")
}

// usageListener is a QueueWatcher reporting the readings the test gives it.
type usageListener struct{ readings []float64 }

func (l usageListener) Listen(context.Context, string, func(), func(string)) error {
	panic("the poller calls ListenAndWatch")
}

func (l usageListener) ListenAndWatch(ctx context.Context, _ string, _ time.Duration, ready func(), _ func(string), usage func(float64)) error {
	ready()
	for _, u := range l.readings {
		usage(u)
	}
	<-ctx.Done()
	return nil
}

// The relay logs the queue filling up once when its usage reaches 50%, and
// once when it is back under 25%, whatever the readings in between.
func TestNotifyQueueCrossingsAreLoggedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &wakeHooks{}
	cfg := b.strictConfig(h, "order-created")
	readings := []float64{0.1, 0.5, 0.7, 0.3, 0.6, 0.2, 0.1, 0.55}
	cfg.Listener = usageListener{readings}
	logger := watermill.NewCaptureLogger()
	p, err := poller.New(b.schema.Beginner, newRecorder(), cfg, logger)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "every reading", func() bool { return len(h.readings()) == len(readings) })
	require.Equal(t, readings, h.readings())
	count := func(level watermill.LogLevel, prefix string) int {
		n := 0
		for _, m := range logger.Captured()[level] {
			if strings.HasPrefix(m.Msg, prefix) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 2, count(watermill.ErrorLogLevel, "PostgreSQL's notification queue is filling up"), "at 0.5 and at 0.55")
	require.Equal(t, 1, count(watermill.InfoLogLevel, "PostgreSQL's notification queue has drained"), "at 0.2")
}
