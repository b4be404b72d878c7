package poller

import (
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtext"
)

// The third stage of a batch's path: the finalize (docs/design.md, "The
// relay"). It records what the send did to each row, under the batch's
// claim token, and reports what it could not record. It decides nothing
// about the pace: the loop does (pace.go).

// finalizer records the outcomes of sent batches. It holds no state of its
// own: every loop's pipeline and Drain share one.
type finalizer struct {
	conns   *conns
	clock   oncebox.Clock
	logger  watermill.LoggerAdapter
	hooks   Hooks
	claims  *claims       // a finalized batch is no longer in flight (heartbeat.go)
	dlqWake chan struct{} // a row marked FAILED wakes the DLQ transfer (jobs.go)
}

// finalized is what the finalize of one batch found.
type finalized struct {
	unavailable error // why events of the batch were released without an attempt, if any
	err         error // the database errors of the finalize
}

// outcomes are the rows of a batch sorted by the fate of their send.
type outcomes struct {
	confirmed, released []oncebox.EventID
	failed              []dialects.FailedEvent
	failures            []Failure
	unavailable         error // why events were released, if any
}

// sortOutcomes sorts a batch's events by their send's results: PROCESSED
// for the confirmed, the next retry (or FAILED) for the rejected, PENDING
// again without an attempt for the rest.
func sortOutcomes(ec oncebox.EventConfig, events []dialects.ClaimedEvent, results []result, now time.Time) outcomes {
	var o outcomes
	for i, r := range results {
		e := &events[i]
		switch r.outcome {
		case outcomeConfirmed:
			o.confirmed = append(o.confirmed, e.ID)
		case outcomeFailed:
			attempt := e.RetryCount + 1
			f := dialects.FailedEvent{ID: e.ID, RetryCount: attempt, Error: dbtext.Error(r.err)}
			final := attempt > ec.MaxRetries
			if final {
				f.Status, f.NextRetryAt = oncebox.StatusFailed, now
			} else {
				f.Status, f.NextRetryAt = oncebox.StatusPending, now.Add(ec.Backoff.RetryDelay(attempt))
			}
			o.failed = append(o.failed, f)
			o.failures = append(o.failures, Failure{ID: e.ID, Attempt: attempt, Final: final, NextRetryAt: f.NextRetryAt, Err: r.err})
		default:
			o.released = append(o.released, e.ID)
			o.unavailable = r.err
		}
	}
	return o
}

// finalize records the outcomes of batches whose sends have ended, in
// claim order, and fills in each one's final: the confirmed rows of all of
// them in one statement where the dialect allows (markProcessedGroup),
// then each batch's failed and released rows. Every statement matches the
// claim token of each row's batch. each, if not nil, is given each batch
// as soon as its own finalize is recorded, before the next batch's failed
// and released rows: the loop settles it meanwhile.
func (f *finalizer) finalize(ec oncebox.EventConfig, group []*batchRun, each func(*batchRun)) {
	now := f.clock.Now().UTC()
	outs := make([]outcomes, len(group))
	for i, r := range group {
		outs[i] = sortOutcomes(ec, r.b.events, r.sent.results, now)
	}
	errs := f.markProcessedGroup(ec, group, outs, now)
	for i, r := range group {
		o := &outs[i]
		if err := f.finalizeRest(ec, r.b.token, o, now); err != nil {
			errs[i] = append(errs[i], err)
		}
		f.claims.release()
		r.final = finalized{unavailable: o.unavailable, err: errors.Join(errs[i]...)}
		if each != nil {
			each(r)
		}
	}
}

// markProcessedGroup marks the confirmed rows of the group's batches
// PROCESSED and reports those it marked (Hooks.Sent): with one commit
// when two batches or more have some and the dialect is a
// dialects.ClaimsFinalizer, with one MarkProcessed per batch otherwise. It
// returns the errors of each batch.
//
// A merged statement lost with the connection loses the finalize of every
// batch in it: their rows stay IN_PROCESS and the recovery returns them to
// PENDING without an attempt, sent again, not lost — as for one batch.
func (f *finalizer) markProcessedGroup(ec oncebox.EventConfig, group []*batchRun, outs []outcomes, now time.Time) [][]error {
	errs := make([][]error, len(group))
	var claims []dialects.ClaimIDs
	for i := range outs {
		if len(outs[i].confirmed) > 0 {
			claims = append(claims, dialects.ClaimIDs{Token: group[i].b.token, IDs: outs[i].confirmed})
		}
	}
	merger, ok := f.conns.d.(dialects.ClaimsFinalizer)
	if !ok || len(claims) < 2 {
		for i := range outs {
			if len(outs[i].confirmed) == 0 {
				continue
			}
			marked, err := f.markProcessed(ec, group[i].b.token, outs[i].confirmed, now)
			if err != nil {
				errs[i] = append(errs[i], err)
			} else if len(marked) > 0 {
				f.hooks.Sent(ec.EventType, marked)
			}
		}
		return errs
	}
	want := 0
	for _, c := range claims {
		want += len(c.IDs)
	}
	ctx, cancel := f.conns.finalizeCtx()
	defer cancel()
	var marked []oncebox.EventID
	err := f.conns.with(ctx, func() error {
		var err error
		marked, err = merger.MarkProcessedClaims(ctx, f.conns.db, claims, now)
		return err
	})
	if err != nil {
		// The rows of every batch stay IN_PROCESS and the recovery returns
		// them to PENDING after max-batch-processing-time (or the heartbeat
		// timeout): sent again, not lost.
		err = fmt.Errorf("oncebox: mark %d events of %q processed (%d batches merged): %w", want, ec.EventType, len(claims), err)
		for i := range outs {
			if len(outs[i].confirmed) > 0 {
				errs[i] = append(errs[i], err)
			}
		}
		return errs
	}
	done := make(map[oncebox.EventID]bool, len(marked))
	for _, id := range marked {
		done[id] = true
	}
	for i := range outs {
		if len(outs[i].confirmed) == 0 {
			continue
		}
		var mine []oncebox.EventID
		for _, id := range outs[i].confirmed {
			if done[id] {
				mine = append(mine, id)
			}
		}
		f.staleCheck(ec, "processed", len(outs[i].confirmed), len(mine))
		if len(mine) > 0 {
			f.hooks.Sent(ec.EventType, mine)
		}
	}
	return errs
}

// finalizeRest records a batch's failed and released rows under its claim
// token.
func (f *finalizer) finalizeRest(ec oncebox.EventConfig, token oncebox.EventID, o *outcomes, now time.Time) error {
	var errs []error
	if len(o.failed) > 0 {
		if err := f.markFailed(ec, token, o.failed, now); err != nil {
			errs = append(errs, err)
		}
		for _, fl := range o.failures {
			f.logger.Error("Event send failed", fl.Err, watermill.LogFields{"event_type": ec.EventType,
				"event_id": fl.ID.String(), "attempt": fl.Attempt, "final": fl.Final, "next_retry_at": fl.NextRetryAt})
			if fl.Final {
				f.wakeDLQ()
			}
		}
		f.hooks.SendFailed(ec.EventType, o.failures)
	}
	if len(o.released) > 0 {
		ctx, cancel := f.conns.finalizeCtx()
		defer cancel()
		err := f.conns.with(ctx, func() error {
			n, err := f.conns.d.ReleaseClaims(ctx, f.conns.db, token, o.released, now)
			if err != nil {
				return err
			}
			f.staleCheck(ec, "released", len(o.released), int(n))
			return nil
		})
		if err != nil {
			// The rows stay IN_PROCESS and the recovery job returns them to
			// PENDING after max-batch-processing-time: sent again, not lost.
			errs = append(errs, fmt.Errorf("oncebox: mark %d events of %q released: %w", len(o.released), ec.EventType, err))
		}
		// Logged once per outage by the poll loop; each batch at DEBUG.
		f.logger.Debug("Batch released without counting an attempt", watermill.LogFields{"event_type": ec.EventType,
			"released": len(o.released), "err": o.unavailable.Error()})
		f.hooks.BrokerUnavailable(ec.EventType, len(o.released), o.unavailable)
	}
	return errors.Join(errs...)
}

// markFailed records the failed attempts. Should the database refuse the
// statement, it is run once more with a plain text in place of each error:
// the attempt must be counted whatever the publisher's error said, or a
// rejected event would be recovered without an attempt and sent forever
// (the rule in docs/design.md). The original errors are in the relay's log.
func (f *finalizer) markFailed(ec oncebox.EventConfig, token oncebox.EventID, failed []dialects.FailedEvent, now time.Time) error {
	run := func(fs []dialects.FailedEvent) error {
		ctx, cancel := f.conns.finalizeCtx()
		defer cancel()
		return f.conns.with(ctx, func() error {
			n, err := f.conns.d.MarkFailed(ctx, f.conns.db, token, fs, now)
			if err != nil {
				return err
			}
			f.staleCheck(ec, "failed", len(fs), int(n))
			return nil
		})
	}
	err := run(failed)
	if err == nil {
		return nil
	}
	plain := make([]dialects.FailedEvent, len(failed))
	for i, fe := range failed {
		fe.Error = fmt.Sprintf("oncebox: the publisher's error (%d bytes) could not be stored; see the relay's log for event %s", len(fe.Error), fe.ID)
		plain[i] = fe
	}
	if err2 := run(plain); err2 != nil {
		// The rows stay IN_PROCESS and the recovery returns them to PENDING
		// after max-batch-processing-time; the poll's error is logged and
		// counted (PollDone).
		return fmt.Errorf("oncebox: mark %d events of %q failed: %w", len(failed), ec.EventType, errors.Join(err, err2))
	}
	f.logger.Error("The publisher's error could not be stored; the attempt was recorded with a plain text", err,
		watermill.LogFields{"event_type": ec.EventType, "events": len(failed)})
	return nil
}

// markProcessed marks the confirmed ids PROCESSED and returns those it
// marked: all of them, unless the claim went stale meanwhile.
func (f *finalizer) markProcessed(ec oncebox.EventConfig, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	ctx, cancel := f.conns.finalizeCtx()
	defer cancel()
	var marked []oncebox.EventID
	err := f.conns.with(ctx, func() error {
		var err error
		marked, err = f.conns.d.MarkProcessed(ctx, f.conns.db, token, ids, now)
		return err
	})
	if err != nil {
		// The rows stay IN_PROCESS and the recovery returns them to PENDING
		// after max-batch-processing-time: sent again, not lost.
		return nil, fmt.Errorf("oncebox: mark %d events of %q processed: %w", len(ids), ec.EventType, err)
	}
	f.staleCheck(ec, "processed", len(ids), len(marked))
	return marked, nil
}

// staleCheck reports a finalize that matched fewer rows than it meant to: the
// claim was recovered and taken again by another instance meanwhile.
func (f *finalizer) staleCheck(ec oncebox.EventConfig, what string, want, got int) {
	if got == want {
		return
	}
	f.logger.Info("Stale finalize: the claim was recovered and taken again by another instance",
		watermill.LogFields{"event_type": ec.EventType, "what": what, "want": want, "got": got})
	f.hooks.StaleFinalize(ec.EventType, want, got)
}

// wakeDLQ wakes the DLQ transfer, unless a wake-up is already pending.
func (f *finalizer) wakeDLQ() {
	select {
	case f.dlqWake <- struct{}{}:
	default:
	}
}
