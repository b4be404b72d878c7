package poller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
)

// Listener holds the connection on which the relay waits for the wake-up
// notifications the publisher adds to the transactions that write events
// (PostgreSQL LISTEN/NOTIFY; see docs/design.md, "Wake-up on commit").
// PgxListener is the implementation for a pgx pool.
type Listener interface {
	// Listen listens on channel and calls notify with the payload of each
	// notification, in the order they arrive, until ctx ends (it then
	// returns nil) or the connection fails (it returns the error). It calls
	// ready once the LISTEN is in effect: every transaction that commits
	// after ready was called is delivered. notify and ready must not block.
	Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error
}

// QueueWatcher is implemented by a Listener that can also read, on its
// session, how full PostgreSQL's notification queue is
// (pg_notification_queue_usage()). The queue is the server's, shared by
// every channel; it drains as fast as its slowest listener reads, and a
// session that ran LISTEN and sits in an open transaction reads nothing:
// once the queue is full every transaction that ran NOTIFY fails at COMMIT.
// The poller reports each reading to Hooks.NotifyQueueUsage and logs its
// crossings (docs/design.md, "Wake-up on commit"). PgxListener implements
// it.
type QueueWatcher interface {
	// ListenAndWatch is Listen, and also calls usage with a reading of the
	// queue's usage (0 to 1): once ready was called, then at most once per
	// every while notifications arrive, and at least once per ten minutes
	// otherwise. usage must not block; nil reads nothing.
	ListenAndWatch(ctx context.Context, channel string, every time.Duration,
		ready func(), notify func(payload string), usage func(ratio float64)) error
}

// The notification queue's usage (QueueWatcher) is read at most once per
// notifyQueueCheck while notifications arrive: a queue that a stuck
// listener holds fills, at the publishers' limiter's cap, in an hour or more
// (docs/design.md), so a minute is early enough, and it costs one statement
// a minute on the listener's own connection.
const notifyQueueCheck = time.Minute

// The relay logs an ERROR once when the queue's usage reaches
// notifyQueueHigh (where the publishers stop notifying, by default:
// publisher.DefaultWakeQueueLimit) and an INFO once when it is back under
// notifyQueueLow; between the two it stays quiet, so that a usage near one
// threshold does not log at every reading.
const (
	notifyQueueHigh = 0.5
	notifyQueueLow  = 0.25
)

// WakeHooks is implemented by a Hooks value that wants to know about the
// wake-ups on commit; the poller checks for it with a type assertion, so
// that Hooks keeps its methods.
type WakeHooks interface {
	// Woken is called for each notification received: eventType is its
	// payload, and target says what it woke: WokeLoop (the type's loop),
	// WokeDiscovery (no loop runs for the type: the discovery looks for
	// it), or WokeNothing (strict mode and the type is not configured).
	Woken(eventType string, target WakeTarget)
	// ListenerUp is called when the listener's LISTEN is in effect, at
	// start and after each reconnection; after a reconnection every loop is
	// woken once, to catch the commits whose notification was lost with the
	// connection.
	ListenerUp()
	// ListenerDown is called with the error that ended the listener's
	// connection; polling goes on at its pace meanwhile, and the listener
	// reconnects after ListenerBackoff.
	ListenerDown(err error)
}

// WakeTarget says what a notification woke.
type WakeTarget int

const (
	// WokeNothing: the type is neither configured nor discoverable (strict
	// mode): the notification is ignored.
	WokeNothing WakeTarget = iota
	// WokeLoop: the type's loop (configured, or discovered and running).
	WokeLoop
	// WokeDiscovery: the discovery, which starts the type's loop if it has
	// due rows.
	WokeDiscovery
	// WokeDLQRetry: the dlq-retry job (the payload was
	// dialects.DLQRetryWakePayload, sent by a DLQ retry: dlq.Store).
	WokeDLQRetry
)

// wakeBoard routes notifications to the loops. Configured types have a
// waker from New on; a discovered type has one while its loop runs; the
// discovery has one unless the event types are strict. Each waker holds at
// most one pending wake-up: a loop that is busy when woken polls again when
// it next sleeps, which is what the notification asks for (its running
// claim may have started before the commit), but no sooner than its
// window allows (waker).
type wakeBoard struct {
	mu        sync.Mutex
	loops     map[string]*waker
	discovery *waker        // nil in strict mode
	dlqRetry  *waker        // the dlq-retry job's; nil without the DLQ
	window    time.Duration // of a discovered type's loop: the defaults' min-fixed-delay
}

// waker is the wake-up of one loop (or of the discovery). It coalesces the
// wake-driven polls that find nothing: after wakeEmptyRun wake-driven polls
// in a row that claimed nothing, the next wake-up is held until a hold has
// passed since the last one began: wakeHoldBase after the run, doubling
// with each further empty one, up to window (the loop's min-fixed-delay).
// It is remembered (the channel holds it) and served when the hold ends. So
// a flood of notifications (any role that can connect may NOTIFY the
// channel) costs at most wakeEmptyRun + log2(window/wakeHoldBase) +
// elapsed/window empty polls; a genuine notification that follows a few
// empty wake polls (the tail of a burst whose events earlier polls took)
// waits wakeHoldBase, 2×, 4×…, and at most window after a long run; and
// under real traffic, where a wake-driven poll claims the events that woke
// it, a commit is relayed at once (a poll that claimed events ends the
// run). The discovery's waker works alike, a query that started the loop
// of a type with work ending its run (wakeBoard.discovered); it starts as
// if after a run, so that a flood of random type names costs one query at
// once, then one per hold.
type waker struct {
	ch     chan struct{}
	window time.Duration
	// last is when the last wake-driven poll was let through, and empty
	// how many wake-driven polls in a row claimed nothing; only the loop's goroutine
	// (sleepOrWake, and typeLoop.report through wakeBoard.claimed) reads and
	// writes them.
	last  time.Time
	empty int
	// urgent marks a wake-up of the relay's own (wakeAll: rows recovered,
	// a listener reconnected), served at once and outside the window: no
	// role outside the relay can cause one.
	urgent atomic.Bool
}

// wakeEmptyRun is how many wake-driven polls in a row may claim nothing
// before the next wake-up waits for the window. Two, not one: under real
// traffic a notification that arrives while a poll runs is often for an
// event that poll claimed, so the poll it wakes finds nothing; with one,
// the next genuine commit would wait up to min-fixed-delay (measured at 300
// events/s: p99 221ms against 24ms with no coalescing; see docs/design.md).
const wakeEmptyRun = 2

// wakeHoldBase is the first hold after a run of wakeEmptyRun empty
// wake-driven polls; it doubles with each further empty one, up to the
// window. A whole window at once made the tail of a burst wait for it: with
// min-fixed-delay 30s (a relay that relies on LISTEN), the last events of
// 400 committed by 4 producers waited 30s when the burst's last two wake
// polls found their events already claimed (TestThroughPgBouncer...; the
// poller's TestWakeAfterEmptyWakePollsWaitsTheHoldNotTheWindow).
const wakeHoldBase = 10 * time.Millisecond

// hold is how long after the last wake-driven poll the next wake-up waits:
// zero within the run of wakeEmptyRun empty ones.
func (w *waker) hold() time.Duration {
	k := w.empty - wakeEmptyRun
	switch {
	case k < 0:
		return 0
	case k >= 30:
		return w.window
	}
	return min(w.window, wakeHoldBase<<k)
}

func newWaker(window time.Duration) *waker {
	return &waker{ch: make(chan struct{}, 1), window: window}
}

// newDiscoveryWaker is the discovery's waker. It starts as after a run of
// empty wake-driven queries: its first wake-up is served at once (no query
// before it), the next ones held until a query finds work
// (wakeBoard.discovered).
func newDiscoveryWaker(window time.Duration) *waker {
	w := newWaker(window)
	w.empty = wakeEmptyRun
	return w
}

// poke leaves a wake-up pending, unless one already is.
func (w *waker) poke() {
	select {
	case w.ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func newWakeBoard(configured map[string]time.Duration, discovery bool, window time.Duration) *wakeBoard {
	b := &wakeBoard{loops: make(map[string]*waker, len(configured)), window: window}
	for t, w := range configured {
		b.loops[t] = newWaker(w)
	}
	if discovery {
		b.discovery = newDiscoveryWaker(window)
	}
	return b
}

// channel returns the waker of t's loop, nil if it has none.
func (b *wakeBoard) channel(t string) *waker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loops[t]
}

// wake wakes t's loop, else the discovery, else nothing. A payload that
// cannot be an event type (empty, longer than oncebox.MaxEventTypeLength,
// not UTF-8, with a NUL: the publisher refuses such a type, so it never
// notifies one) wakes nothing: only a role that can NOTIFY the channel
// sends it, and each would cost a discovery query.
func (b *wakeBoard) wake(t string) WakeTarget {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t == dialects.DLQRetryWakePayload {
		// No event type is empty: a DLQ retry's wake-up (dlq.Store).
		if b.dlqRetry != nil {
			b.dlqRetry.poke()
			return WokeDLQRetry
		}
		return WokeNothing
	}
	if w, ok := b.loops[t]; ok {
		w.poke()
		return WokeLoop
	}
	if b.discovery != nil && eventTypeName(t) {
		b.discovery.poke()
		return WokeDiscovery
	}
	return WokeNothing
}

// claimed records whether the wake-driven poll of t's loop claimed
// events (typeLoop.report, on the loop's goroutine): one that did ends the run of
// empty ones.
func (b *wakeBoard) claimed(t string, some bool) {
	b.mu.Lock()
	w := b.loops[t]
	b.mu.Unlock()
	w.outcome(some)
}

// discovered records whether a wake-driven discovery query started the
// loop of a type with work (discovery.loop, on its goroutine). Before, the
// discovery was held a whole window after every wake-driven query: a
// discovered type's loop ends at its first empty poll, so the commits of a
// burst that came just after it woke the discovery, which made them wait
// the defaults' min-fixed-delay (30s in TestThroughPgBouncerTransactionPooling).
func (b *wakeBoard) discovered(some bool) {
	b.discovery.outcome(some)
}

// outcome ends the run of empty wake-driven polls (some) or extends it.
// Nil: no waker.
func (w *waker) outcome(some bool) {
	switch {
	case w == nil:
	case some:
		w.empty = 0
	default:
		w.empty++
	}
}

// eventTypeName reports whether s can be an event type: the publisher's
// rule (publisher.validateName).
func eventTypeName(s string) bool {
	return s != "" && len(s) <= oncebox.MaxEventTypeLength && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// wakeAll wakes every loop, the discovery and the dlq-retry job at once,
// whatever their windows (waker.urgent).
func (b *wakeBoard) wakeAll() {
	b.wakeLoops()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dlqRetry != nil {
		b.dlqRetry.urgent.Store(true)
		b.dlqRetry.poke()
	}
}

// wakeLoops wakes every loop and the discovery at once, whatever their
// windows (waker.urgent): rows are due now (recovered, or back from the
// DLQ).
func (b *wakeBoard) wakeLoops() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.loops {
		w.urgent.Store(true)
		w.poke()
	}
	if b.discovery != nil {
		b.discovery.urgent.Store(true)
		b.discovery.poke()
	}
}

// add gives the discovered type t a waker for as long as its loop runs.
func (b *wakeBoard) add(t string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.loops[t] = newWaker(b.window)
}

// remove takes the waker of the discovered type t away when its loop has
// ended and the discovery has released the type. A wake-up still pending on
// it is passed to the discovery. The interleaving this covers: the loop's
// last poll claims nothing, a transaction commits, its notification is put
// on the loop's channel, the loop ends without sleeping again. Since wake
// and remove hold the same lock, the notification either found the channel
// (and remove sees it pending) or found none (and woke the discovery). The
// discovery, woken after the type was released, finds its row and starts
// the loop again.
func (b *wakeBoard) remove(t string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.loops[t]
	delete(b.loops, t)
	if w != nil && len(w.ch) > 0 && b.discovery != nil {
		b.discovery.poke()
	}
}

// sleepOrWake waits d on c or until w is woken (served through its window:
// admit); ok is false when ctx ended first, woken tells a wake-up from the
// end of the wait. A signal on cut ends the wait early without a wake-up
// (the discovery's freed loops); nil never does. A zero d does not wait
// (and drops nothing: a pending wake-up stays for the next sleep). A nil w
// is never woken.
func sleepOrWake(ctx context.Context, c oncebox.Clock, d time.Duration, w *waker, cut <-chan struct{}) (ok, woken bool) {
	if ctx.Err() != nil {
		return false, false
	}
	if d <= 0 {
		return true, false
	}
	var wake chan struct{}
	if w != nil {
		wake = w.ch
	}
	start := c.Now()
	t := clock.NewTimer(c, d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true, false
	case <-cut:
		return true, false
	case <-ctx.Done():
		return false, false
	case <-wake:
	}
	t.Stop()
	if !w.admit(ctx, c, d-c.Since(start)) {
		return false, false
	}
	return true, true
}

// admit serves a wake-up just taken from w.ch, and reports false when ctx
// ended while it was held. The caller's timer is stopped: one timer at a
// time, so that a sleeping loop is one waiter of a fake clock.
//
// A wake-up less than w.hold() after the last wake-driven poll (nonzero
// once the last wakeEmptyRun of them claimed nothing) is held until that
// hold ends (or for at most limit, if sooner: the poll is due then anyway),
// then served. The relay's own wake-ups (wakeAll) are served at once.
func (w *waker) admit(ctx context.Context, c oncebox.Clock, limit time.Duration) bool {
	if w.urgent.Swap(false) {
		w.drain()
		return true
	}
	now := c.Now()
	hold := min(w.last.Add(w.hold()).Sub(now), limit)
	if !w.last.IsZero() && hold > 0 {
		t := clock.NewTimer(c, hold)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			// The wake-up is not served; the loop ends.
			t.Stop()
			return false
		}
		now = c.Now()
	}
	w.last = now
	w.drain()
	return true
}

// drain drops a wake-up left pending while a served one was held: its
// transaction committed before the notification came, so before the poll
// about to start, whose claim sees it. Kept, it would be served again at
// once after that poll (and after a poll that claimed events, spend the
// credit of the next real one).
func (w *waker) drain() {
	select {
	case <-w.ch:
	default:
	}
}

// listenLoop keeps one Listener session open on the tables' channel until
// ctx ends, routing each notification to the loops. A lost connection is
// logged and reported, and opened again after ListenerBackoff (real time:
// like FinalizeTimeout it bounds a network retry, not the relay's work),
// while the loops keep polling at their pace: a lost listener costs latency,
// never an event. The backoff restarts from its minimum after each session
// that reached ready.
func (p *Poller) listenLoop(ctx context.Context) {
	channel := dialects.NotifyChannel(p.config.Dialect.Tables())
	wh, _ := p.config.Hooks.(WakeHooks)
	backoff := p.config.ListenerBackoff.Strategy()
	high := false // the queue's usage reached notifyQueueHigh and has not fallen under notifyQueueLow
	usage := func(ratio float64) {
		p.config.Hooks.NotifyQueueUsage(ratio)
		fields := watermill.LogFields{"usage": ratio}
		switch {
		case !high && ratio >= notifyQueueHigh:
			high = true
			p.logger.Error("PostgreSQL's notification queue is filling up: a session that ran LISTEN sits in an open transaction "+
				"(pg_stat_activity: state 'idle in transaction', oldest xact_start). Publishers stop notifying at "+
				"publisher.Config.WakeQueueLimit; when it is full every transaction that runs NOTIFY fails at COMMIT", nil, fields)
		case high && ratio < notifyQueueLow:
			high = false
			p.logger.Info("PostgreSQL's notification queue has drained", fields)
		}
	}
	listen := func(ctx context.Context, channel string, ready func(), notify func(string)) error {
		if qw, ok := p.listener.(QueueWatcher); ok {
			return qw.ListenAndWatch(ctx, channel, notifyQueueCheck, ready, notify, usage)
		}
		return p.listener.Listen(ctx, channel, ready, notify)
	}
	for sessions := 0; ; sessions++ {
		up := false
		err := listen(ctx, channel, func() {
			up = true
			p.logger.Debug("Listening for wake-ups on commit", watermill.LogFields{"channel": channel})
			if wh != nil {
				wh.ListenerUp()
			}
			// Catch up after a reconnection: a transaction that committed
			// while no session was listening sent a notification nobody
			// heard. Not after the first LISTEN: each loop's first poll is
			// immediate at Run, and what commits between it and this LISTEN
			// waits at most the loop's first delay (min-fixed-delay).
			if sessions > 0 {
				p.wakes.wakeAll()
			}
		}, func(payload string) {
			target := p.wakes.wake(payload)
			if wh != nil {
				wh.Woken(payload, target)
			}
		})
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrListenerDeaf) {
			p.logger.Error("Wake-up on commit is off: the relay polls only", err, watermill.LogFields{"channel": channel})
			if wh != nil {
				wh.ListenerDown(err)
			}
			return
		}
		if up {
			backoff = p.config.ListenerBackoff.Strategy()
		}
		delay := backoff.Next(false)
		p.logger.Error("Wake-up listener lost: polling goes on at its pace; reconnecting", err,
			watermill.LogFields{"channel": channel, "retry_in": delay})
		if wh != nil {
			wh.ListenerDown(err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// wakeOnCommit returns the poller's listener (nil: polling only) and its
// wake board: a channel per configured type, and one for the discovery
// unless the event types are strict.
func wakeOnCommit(c Config, db any, events []oncebox.EventConfig) (Listener, *wakeBoard) {
	var listener Listener
	if !c.DisableWakeOnCommit {
		listener = c.Listener
		if listener == nil {
			listener = defaultListener(db, c.Dialect)
		}
	}
	configured := make(map[string]time.Duration, len(events))
	for _, ec := range events {
		configured[ec.EventType] = ec.Polling.MinFixedDelay
	}
	var window time.Duration // the defaults' min-fixed-delay
	if defaults, err := c.Oncebox.Event(""); err == nil {
		window = defaults.Polling.MinFixedDelay
	}
	b := newWakeBoard(configured, !c.Oncebox.Outbox.StrictEventTypes, window)
	if c.Oncebox.Outbox.DLQ.Enabled {
		b.dlqRetry = newWaker(dlqRetryWakeWindow)
	}
	return listener, b
}
