package poller

import (
	"time"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// The pace of a type's loop: how long it waits before its next claim. It
// is decided in one place, pace.next, a pure function of the loop's pace
// and of what the last poll found; the loop (loop.go) applies it. The
// outage's backoff, which has a state and side effects of its own (the
// log and Hooks.BrokerOutage once per outage, outage.go), is computed by
// the loop and handed to next as a number.

// pollOutcome is what the pace learns from one poll: a batch that settled
// (was sent and finalized), a claim that found nothing or failed, or a
// probe that found the broker still down.
type pollOutcome struct {
	// settled: a batch was sent and finalized. Otherwise the claim found
	// nothing or failed (or, with probed, no claim ran).
	settled bool
	// busy (settled only): the batch was full, or ordered and not empty,
	// and none of its events was released because the broker was
	// unavailable. More rows are probably due.
	busy bool
	// heads (a claim that found nothing only): an ordered type's batch
	// settled busy since that claim ran, so the next events of its keys,
	// which the claim could not take, are heads now (docs/ordering.md,
	// "Pacing").
	heads bool
	// woken: the poll began on a wake-up (wake.go).
	woken bool
	// probed: the broker is in an outage and a probe found it still down
	// (outage.probe): no claim ran.
	probed bool
	// backoff is the outage's wait when the poll found the broker
	// unavailable (or probed it down), zero otherwise.
	backoff time.Duration
}

// pace is the state of a type's pace: the adaptive strategy's step and the
// floor after a wake-up. It is a value; next returns the new one.
type pace struct {
	adaptive      pacing.Strategy
	minFixedDelay time.Duration
}

func newPace(p oncebox.PollingSettings) pace {
	return pace{adaptive: *pacing.New(p), minFixedDelay: p.MinFixedDelay}
}

// next returns the wait before the next claim after a poll's outcome o,
// and the pace after it:
//
//   - A busy batch: at once. The adaptive strategy is reset to its minimum,
//     but the article's rule (wait min-fixed-delay) is not followed: it
//     would cap a backlog's drain at batch-size per min-fixed-delay (800
//     rows/s with the defaults); min-fixed-delay is the floor between
//     partial or empty polls only (docs/configuration.md).
//   - A batch that was not busy, an empty or failed claim: the adaptive
//     strategy's next delay (grows from min-fixed-delay to max-fixed-delay).
//   - An empty claim of an ordered type after a busy batch settled beside
//     it: at once (heads).
//   - After a wake-up: at most min-fixed-delay, a follow-up poll that finds
//     the event of a transaction whose notification the publisher's
//     limiter skipped because this one went out just before, and which
//     committed after this poll's claim (publisher/notify.go).
//   - The broker unavailable: at least the outage's backoff. A failed probe:
//     the backoff, and the adaptive strategy does not move.
func (p pace) next(o pollOutcome) (time.Duration, pace) {
	if o.probed {
		return o.backoff, p
	}
	var d time.Duration
	switch {
	case o.settled && o.busy:
		p.adaptive.Next(true)
		d = 0
	case !o.settled && o.heads:
		d = 0
	default:
		d = p.adaptive.Next(false)
	}
	if o.woken {
		d = min(d, p.minFixedDelay)
	}
	return max(d, o.backoff), p
}
