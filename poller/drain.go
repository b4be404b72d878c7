package poller

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncebox/watermill-oncebox"
)

// Drain relays the events that are due, in the caller's goroutine, and
// returns once none is left: for each event type it claims a batch, sends
// it and finalizes it exactly as Run's poll loops do (the same claim, the
// same publisher calls, the same finalize guarded by the claim token, the
// same hooks), batch after batch until the type has no due row. The types
// are the configured ones and, unless Oncebox.Outbox.StrictEventTypes, every
// type with a due row (as the discovery finds them). Due means at the
// Config.Clock's time.
//
// It starts nothing in the background: no wake-up listener, no heartbeat,
// no recovery, DLQ transfer or clean-up. It returns the number of events
// sent (marked PROCESSED) and, joined into one error, what stopped events
// from being sent: each event the publisher refused (it counted an attempt
// and waits for its retry, or is FAILED), a broker that was unavailable
// (the batch is released without an attempt and Drain stops, since the rows
// are due again at once) and database errors. A cancelled ctx stops it
// between batches; a send it cut short counts no attempt.
//
// Drain is meant for tests and one-shot tools (package oncetest builds on
// it). It may run beside Run (the claims skip each other's rows) and returns
// oncebox.ErrClosed after Close.
func (p *Poller) Drain(ctx context.Context) (int, error) {
	select {
	case <-p.closing:
		return 0, oncebox.ErrClosed
	default:
	}
	sent := 0
	var errs []error
	for {
		types, err := p.drainTypes(ctx)
		if err != nil {
			return sent, errors.Join(append(errs, err)...)
		}
		claimed := false
		for _, ec := range types {
			for {
				if err := ctx.Err(); err != nil {
					return sent, errors.Join(append(errs, err)...)
				}
				b, err := p.claimBatch(ec)
				if err != nil {
					return sent, errors.Join(append(errs, err)...)
				}
				if len(b.events) == 0 {
					break
				}
				claimed = true
				results := p.send(ctx, b.events)
				if ctx.Err() != nil {
					// The send was cut short: a failure may be the
					// cancellation, not a refusal. Count no attempt.
					for i := range results {
						if results[i].outcome == outcomeFailed {
							results[i] = result{outcome: outcomeUnavailable, err: ctx.Err()}
						}
					}
				}
				unavailable, err := p.finalize(ec, b.token, b.events, results)
				released := 0
				for i, r := range results {
					switch r.outcome {
					case outcomeConfirmed:
						sent++
					case outcomeUnavailable:
						released++
					case outcomeFailed:
						e := &b.events[i]
						errs = append(errs, fmt.Errorf("oncebox: drain: event %s of type %q (message %s) refused by the publisher, attempt %d: %w",
							e.ID, ec.EventType, e.MessageUUID, e.RetryCount+1, r.err))
					}
				}
				if err != nil {
					return sent, errors.Join(append(errs, err)...)
				}
				if unavailable != nil {
					return sent, errors.Join(append(errs, fmt.Errorf("oncebox: drain: %d events of type %q released, the broker is unavailable: %w",
						released, ec.EventType, unavailable))...)
				}
			}
		}
		if !claimed {
			return sent, errors.Join(errs...)
		}
	}
}

// drainTypes returns the types Drain relays: the configured ones, then,
// without StrictEventTypes, the others that have a due row.
func (p *Poller) drainTypes(ctx context.Context) ([]oncebox.EventConfig, error) {
	if p.config.Oncebox.Outbox.StrictEventTypes {
		return p.events, nil
	}
	d := p.newDiscovery()
	types := append([]oncebox.EventConfig(nil), p.events...)
	for after := ""; ; {
		page, err := d.dueTypes(ctx, after)
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			if !t.Due || d.configured[t.Name] {
				continue
			}
			ec, err := p.config.Oncebox.Event(t.Name)
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
