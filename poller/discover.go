package poller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// discovery relays the event types nobody configured, as Watermill's
// forwarder relays whatever is published. One loop asks the database which
// types have a due PENDING row (Dialect.DueTypes: one or two index
// probes per type with PENDING rows, paging through the types after the
// last one seen when they do not fit a page) at the pace of the defaults
// block; each type it finds gets a loop of its own, with the defaults'
// settings. That loop runs while the type has work and ends at its first
// empty poll; discovery starts it again when rows come. An idle outbox so
// costs the discovery's polls alone (about 70 an hour with the defaults),
// whatever the number of types seen before.
//
// Fairness. At most MaxDiscoveredTypes loops run at once. A due type that
// finds them all taken joins a queue; while the queue is not empty, each
// loop that has run for a quantum (the defaults' max-fixed-delay) is asked
// to yield (its context ends: it settles its batches in flight and
// returns), and the type at the head of the queue takes the freed loop. A
// type whose turn ended with work left goes to the back of the queue: round
// robin, so one type never blocks another (docs/design.md, "Discovery",
// states the bound).
//
// A type whose last loop claimed nothing although it was due (an ordered
// type whose keys are all held: a key's head waits for a retry, or blocks)
// is started again at each discovery poll where it is due, but such a start
// does not count as work found: the discovery's pace keeps growing to its
// max-fixed-delay, as for an idle outbox.
type discovery struct {
	conns      *conns
	config     Config // Oncebox (a discovered type's settings), MaxDiscoveredTypes, Clock, Hooks
	logger     watermill.LoggerAdapter
	wakes      *wakeBoard
	runType    func(ctx context.Context, ec oncebox.EventConfig) (claimed bool) // a discovered type's loop
	configured map[string]bool
	quantum    time.Duration // a loop's turn while other types wait for one
	page       int           // types per discovery statement
	freed      chan struct{} // a loop ended while types waited for one

	mu     sync.Mutex
	active map[string]*turn // types with a running loop
	queue  []string         // due types waiting for a loop, first come first
	queued map[string]bool
	empty  map[string]bool // due types whose last loop claimed nothing
	after  string          // the next page starts after this type ("": the first)
}

// turn is the run of one discovered type's loop.
type turn struct {
	began  time.Time
	end    context.CancelFunc
	ending bool // asked to yield to a waiting type
}

// newDiscovery returns the discovery of the types beside the configured
// events; runType runs a discovered type's loop.
func newDiscovery(c Config, events []oncebox.EventConfig, cn *conns, logger watermill.LoggerAdapter, wakes *wakeBoard,
	runType func(context.Context, oncebox.EventConfig) bool) *discovery {
	configured := make(map[string]bool, len(events))
	for _, ec := range events {
		configured[ec.EventType] = true
	}
	return &discovery{conns: cn, config: c, logger: logger, wakes: wakes, runType: runType,
		configured: configured, freed: make(chan struct{}, 1),
		// The page holds the configured and the running types besides the
		// others; MySQL and MariaDB bound the statement's size (999).
		page:   min(len(configured)+c.MaxDiscoveredTypes, 999),
		active: map[string]*turn{}, queued: map[string]bool{}, empty: map[string]bool{}}
}

// loop runs the discovery until ctx ends; start runs a type's loop on the
// poller's wait group.
func (d *discovery) loop(ctx context.Context, start func(func(context.Context))) {
	defaults, err := d.config.Oncebox.Event("")
	if err != nil { // cannot happen: "" resolves to the defaults
		d.logger.Error("Discovery disabled", err, nil)
		return
	}
	// The quantum is the defaults' latency budget (max-fixed-delay): a
	// type that waits for a loop waits, per round of the queue, about as
	// long as an event of an idle type waits for its poll.
	d.quantum = max(defaults.Polling.MaxFixedDelay, defaults.Polling.MinFixedDelay)
	s := pacing.New(defaults.Polling)
	c := d.config.Clock
	next := c.Now() // the first poll is immediate
	var yieldAt time.Time
	for {
		wait := next.Sub(c.Now())
		if !yieldAt.IsZero() {
			wait = min(wait, yieldAt.Sub(c.Now()))
		}
		// Woken by a commit of a type without a loop (coalesced after
		// wake-driven queries that found no work: waker), or cut
		// short when a loop ended while types waited for one.
		ok, woken := sleepOrWake(ctx, c, wait, d.wakes.discovery, d.freed)
		if !ok {
			return
		}
		now := c.Now()
		if !woken && now.Before(next) {
			// A loop's quantum ended or a loop ended: hand the loops over,
			// no statement.
			_, _, yieldAt = d.schedule(ctx, start, now)
			continue
		}
		err := d.poll(ctx)
		var started, busy int
		started, busy, yieldAt = d.schedule(ctx, start, c.Now())
		if woken {
			d.wakes.discovered(busy > 0) // wake.go: coalescing
		}
		// A start counts as work found unless the type's last loop claimed
		// nothing (its keys held): else such a type would keep the
		// discovery at min-fixed-delay for as long as its keys are held.
		delay := s.Next(busy > 0)
		next = now.Add(delay)
		if closing(ctx, err) {
			// A statement that waited for its connection slot ended with
			// the context: no failure to report.
			err = nil
		}
		if err != nil {
			d.logger.Error("Discovery of event types failed", err, watermill.LogFields{"next_delay": delay})
		}
		d.config.Hooks.PollDone(PollInfo{EventType: DiscoveryEventType, Claimed: started, NextDelay: delay, Err: err})
	}
}

// DiscoveryEventType is the EventType of the PollInfo the discovery reports
// after each of its polls: Claimed is then the number of types whose loop
// it started.
const DiscoveryEventType = "(discovery)"

// schedule gives the free loops to the types at the head of the queue, then
// asks as many loops to yield as types still wait, among those whose
// quantum has run, longest running first. It returns how many loops it
// started, how many of them for types not known to claim nothing, and when
// the next loop's quantum ends if types still wait for one (zero if not).
func (d *discovery) schedule(ctx context.Context, start func(func(context.Context)), now time.Time) (started, busy int, yieldAt time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.queue) > 0 && len(d.active) < d.config.MaxDiscoveredTypes {
		t := d.queue[0]
		d.queue = d.queue[1:]
		delete(d.queued, t)
		ec, err := d.config.Oncebox.Event(t)
		if err != nil {
			d.logger.Error("Discovered event type cannot be relayed", err, watermill.LogFields{"event_type": t})
			continue
		}
		started++
		if !d.empty[t] {
			busy++
		}
		loopCtx, end := context.WithCancel(ctx)
		d.active[t] = &turn{began: now, end: end}
		d.wakes.add(t)
		start(func(context.Context) {
			claimed := d.runType(loopCtx, ec)
			end()
			// Released before its wake channel is removed: a wake-up
			// pending on it then goes to the discovery, which can start
			// the type again (wakeBoard.remove).
			d.release(t, claimed)
			d.wakes.remove(t)
		})
	}
	waiting := len(d.queue)
	var running []*turn
	for _, r := range d.active {
		if r.ending {
			waiting-- // its loop is already yielding to one of them
		} else {
			running = append(running, r)
		}
	}
	if waiting <= 0 {
		return started, busy, time.Time{}
	}
	slices.SortFunc(running, func(a, b *turn) int { return a.began.Compare(b.began) })
	for _, r := range running {
		if waiting == 0 {
			break
		}
		if end := r.began.Add(d.quantum); now.Before(end) {
			return started, busy, end
		}
		r.ending = true
		r.end()
		waiting--
	}
	return started, busy, time.Time{}
}

// release records the end of t's loop. A loop that yielded with events
// claimed goes to the back of the queue: it probably has more.
func (d *discovery) release(t string, claimed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.active[t]
	delete(d.active, t)
	if claimed {
		delete(d.empty, t)
	} else {
		d.empty[t] = true
	}
	if r != nil && r.ending && claimed {
		d.enqueue(t)
	}
	if len(d.queue) > 0 {
		select {
		case d.freed <- struct{}{}:
		default: // already signalled
		}
	}
}

// enqueue adds t at the back of the queue unless it is there. d.mu is held.
func (d *discovery) enqueue(t string) {
	if !d.queued[t] {
		d.queued[t] = true
		d.queue = append(d.queue, t)
	}
}

// poll runs the discovery statement on the next page of types and queues
// the due types that have no loop. A queued type, or a mark that a type's
// last loop claimed nothing, is dropped when the page covers the type and
// shows it no longer due (its rows were taken by another instance, or
// left): so both stay bounded by the types with due rows.
func (d *discovery) poll(ctx context.Context) error {
	d.mu.Lock()
	after := d.after
	d.mu.Unlock()
	page, err := d.dueTypes(ctx, after)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	last := "" // the page covers (after, last], or every type after after if not full
	if len(page) == d.page {
		last = page[len(page)-1].Name
	}
	covers := func(t string) bool { return t > after && (last == "" || t <= last) }
	due := make(map[string]bool, len(page))
	for _, r := range page {
		if !r.Due || d.configured[r.Name] {
			continue
		}
		due[r.Name] = true
		if d.active[r.Name] == nil {
			d.enqueue(r.Name)
		}
	}
	kept := d.queue[:0]
	for _, t := range d.queue {
		if covers(t) && !due[t] {
			delete(d.queued, t)
			continue
		}
		kept = append(kept, t)
	}
	clear(d.queue[len(kept):])
	d.queue = kept
	for t := range d.empty {
		if covers(t) && !due[t] && d.active[t] == nil {
			delete(d.empty, t)
		}
	}
	d.after = last
	return nil
}

// dueTypes runs the discovery statement on the page of types after after.
func (d *discovery) dueTypes(ctx context.Context, after string) ([]dialects.DueType, error) {
	var types []dialects.DueType
	err := d.conns.with(ctx, func() error {
		// Like the claim, a started statement is not cancelled by Close:
		// cancelling it would cost the pool its connection.
		qctx, cancel := d.conns.finalizeCtx()
		defer cancel()
		var err error
		types, err = d.conns.d.DueTypes(qctx, d.conns.db, d.config.Clock.Now().UTC(), after, d.page)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("oncebox: discover event types: %w", err)
	}
	return types, nil
}

// dueEventTypes returns configured, then the other types that have a due
// row (Drain).
func (d *discovery) dueEventTypes(ctx context.Context, configured []oncebox.EventConfig) ([]oncebox.EventConfig, error) {
	types := append([]oncebox.EventConfig(nil), configured...)
	for after := ""; ; {
		page, err := d.dueTypes(ctx, after)
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			if !t.Due || d.configured[t.Name] {
				continue
			}
			ec, err := d.config.Oncebox.Event(t.Name)
			if err != nil {
				return nil, err
			}
			types = append(types, ec)
		}
		if len(page) < d.page {
			return types, nil
		}
		after = page[len(page)-1].Name
	}
}
