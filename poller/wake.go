package poller

import (
	"context"
	"sync"
	"time"

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
)

// wakeBoard routes notifications to the loops. Configured types have a
// channel from New on; a discovered type has one while its loop runs; the
// discovery has one unless the event types are strict. Each channel holds
// at most one pending wake-up: a loop that is busy when woken polls again
// at once when it next sleeps, which is what the notification asks for (its
// running claim may have started before the commit).
type wakeBoard struct {
	mu        sync.Mutex
	loops     map[string]chan struct{}
	discovery chan struct{} // nil in strict mode
}

func newWakeBoard(configured []string, discovery bool) *wakeBoard {
	b := &wakeBoard{loops: make(map[string]chan struct{}, len(configured))}
	for _, t := range configured {
		b.loops[t] = make(chan struct{}, 1)
	}
	if discovery {
		b.discovery = make(chan struct{}, 1)
	}
	return b
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// channel returns the wake channel of t's loop, nil if it has none.
func (b *wakeBoard) channel(t string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loops[t]
}

// wake wakes t's loop, else the discovery, else nothing.
func (b *wakeBoard) wake(t string) WakeTarget {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.loops[t]; ok {
		poke(ch)
		return WokeLoop
	}
	if b.discovery != nil {
		poke(b.discovery)
		return WokeDiscovery
	}
	return WokeNothing
}

// wakeAll wakes every loop and the discovery.
func (b *wakeBoard) wakeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.loops {
		poke(ch)
	}
	if b.discovery != nil {
		poke(b.discovery)
	}
}

// add gives the discovered type t a wake channel for as long as its loop
// runs.
func (b *wakeBoard) add(t string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.loops[t] = make(chan struct{}, 1)
}

// remove takes the channel of the discovered type t away when its loop has
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
	ch := b.loops[t]
	delete(b.loops, t)
	if len(ch) > 0 && b.discovery != nil {
		poke(b.discovery)
	}
}

// sleepOrWake waits d on c or until wake fires; ok is false when ctx
// ended first, woken tells a wake-up from the end of the wait. A zero d does
// not wait (and drops nothing: a pending wake-up stays for the next sleep).
func sleepOrWake(ctx context.Context, c oncebox.Clock, d time.Duration, wake <-chan struct{}) (ok, woken bool) {
	if ctx.Err() != nil {
		return false, false
	}
	if d <= 0 {
		return true, false
	}
	t := clock.NewTimer(c, d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true, false
	case <-wake:
		return true, true
	case <-ctx.Done():
		return false, false
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
	channel := dialects.NotifyChannel(p.d.Tables())
	wh, _ := p.config.Hooks.(WakeHooks)
	backoff := p.config.ListenerBackoff.Strategy()
	for sessions := 0; ; sessions++ {
		up := false
		err := p.listener.Listen(ctx, channel, func() {
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
func (p *Poller) wakeOnCommit(db any, events []oncebox.EventConfig) (Listener, *wakeBoard) {
	var listener Listener
	if !p.config.DisableWakeOnCommit {
		listener = p.config.Listener
		if listener == nil {
			listener = defaultListener(db, p.d)
		}
	}
	configured := make([]string, len(events))
	for i, ec := range events {
		configured[i] = ec.EventType
	}
	return listener, newWakeBoard(configured, !p.config.Oncebox.Outbox.StrictEventTypes)
}
