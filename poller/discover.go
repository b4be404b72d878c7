package poller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// discovery relays the event types nobody configured, as Watermill's
// forwarder relays whatever is published. One loop asks the database which
// types have a due PENDING row (Dialect.EventsDueTypes: a loose index scan,
// one index probe per type found) at the pace of the defaults block; each
// type it finds that has no loop gets one of its own, with the defaults'
// settings, so one type never blocks another. That loop runs while the type
// has work and ends at its first empty poll; discovery starts it again when
// rows come. An idle outbox so costs the discovery's polls alone (about 70
// an hour with the defaults), whatever the number of types seen before.
type discovery struct {
	p          *Poller
	configured map[string]bool
	mu         sync.Mutex
	active     map[string]bool // types with a running loop
}

func (p *Poller) newDiscovery() *discovery {
	configured := make(map[string]bool, len(p.events))
	for _, ec := range p.events {
		configured[ec.EventType] = true
	}
	return &discovery{p: p, configured: configured, active: map[string]bool{}}
}

// loop runs the discovery until ctx ends; start runs a type's loop on the
// poller's wait group.
func (d *discovery) loop(ctx context.Context, start func(func(context.Context))) {
	p := d.p
	defaults, err := p.config.Oncebox.Event("")
	if err != nil { // cannot happen: "" resolves to the defaults
		p.logger.Error("Discovery disabled", err, nil)
		return
	}
	s := pacing.New(defaults.Polling)
	var delay time.Duration
	for p.wakes.discovery.sleep(ctx, p.config.Clock, delay) {
		types, err := d.dueTypes(ctx)
		started := 0
		for _, t := range types {
			if d.configured[t] || !d.claim(t) {
				continue
			}
			ec, err := p.config.Oncebox.Event(t)
			if err != nil {
				d.release(t)
				p.logger.Error("Discovered event type cannot be relayed", err, watermill.LogFields{"event_type": t})
				continue
			}
			started++
			p.wakes.add(t)
			start(func(ctx context.Context) {
				// Released before its wake channel is removed: a wake-up
				// pending on it then goes to the discovery, which can start
				// the type again (wakeBoard.remove).
				defer func() { d.release(t); p.wakes.remove(t) }()
				p.pollLoop(ctx, ec, true)
			})
		}
		delay = s.Next(started > 0)
		if closing(ctx, err) {
			// A statement that waited for its connection slot ended with
			// the context: no failure to report.
			err = nil
		}
		if err != nil {
			p.logger.Error("Discovery of event types failed", err, watermill.LogFields{"next_delay": delay})
		}
		p.config.Hooks.PollDone(PollInfo{EventType: DiscoveryEventType, Claimed: started, NextDelay: delay, Err: err})
	}
}

// DiscoveryEventType is the EventType of the PollInfo the discovery reports
// after each of its polls: Claimed is then the number of types whose loop
// it started.
const DiscoveryEventType = "(discovery)"

// claim marks t active unless it is, or MaxDiscoveredTypes loops run.
func (d *discovery) claim(t string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active[t] || len(d.active) >= d.p.config.MaxDiscoveredTypes {
		return false
	}
	d.active[t] = true
	return true
}

func (d *discovery) release(t string) {
	d.mu.Lock()
	delete(d.active, t)
	d.mu.Unlock()
}

// dueTypes runs the discovery statement.
func (d *discovery) dueTypes(ctx context.Context) ([]string, error) {
	p := d.p
	var types []string
	err := p.withConn(ctx, func() error {
		// Like the claim, a started statement is not cancelled by Close:
		// cancelling it would cost the pool its connection.
		qctx, cancel := p.finalizeCtx()
		defer cancel()
		q := p.d.EventsDueTypes(p.config.Clock.Now().UTC(), len(d.configured)+p.config.MaxDiscoveredTypes)
		rows, err := p.db.QueryContext(qctx, q.SQL, q.Args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				return err
			}
			types = append(types, t)
		}
		if r, ok := rows.(interface{ Err() error }); ok {
			return r.Err()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("oncebox: discover event types: %w", err)
	}
	return types, nil
}
