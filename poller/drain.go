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
	// The types: the configured ones, then, without StrictEventTypes, the
	// others that have a due row, as the discovery finds them.
	types := p.events
	var d *discovery
	if !p.config.Oncebox.Outbox.StrictEventTypes {
		d = newDiscovery(p.config, p.events, p.conns, p.logger, p.wakes, nil)
	}
	st := p.stages
	sent := 0
	var errs []error
	for {
		var err error
		if d != nil {
			types, err = d.dueEventTypes(ctx, p.events)
		}
		if err != nil {
			return sent, errors.Join(append(errs, err)...)
		}
		claimed := false
		for _, ec := range types {
			for {
				if err := ctx.Err(); err != nil {
					return sent, errors.Join(append(errs, err)...)
				}
				b, err := st.claimer.claimBatch(ec)
				if err != nil {
					return sent, errors.Join(append(errs, err)...)
				}
				if len(b.events) == 0 {
					break
				}
				claimed = true
				// The same stages as a loop's pipeline, in this goroutine:
				// send (a send ctx cut short counts no attempt), finalize.
				run := &batchRun{b: b, sent: st.sender.sendBatch(ctx, b, nil, nil)}
				st.fin.finalize(ec, []*batchRun{run}, nil)
				unavailable, err := run.final.unavailable, run.final.err
				released := 0
				for i, r := range run.sent.results {
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
