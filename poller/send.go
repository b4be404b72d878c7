package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// BatchPublisher is an optional extension of message.Publisher for
// publishers that send a batch and know which messages the broker
// confirmed. The poller uses it when publisherOut implements it.
type BatchPublisher interface {
	message.Publisher
	// PublishBatch sends msgs to topic and returns one error per message, in
	// order: nil for a confirmed message, the broker's reason for a rejected
	// one (an error for which Config.IsUnavailable holds counts no attempt:
	// the message was not refused, the connection went away). A non-nil
	// second result is the fate of the whole call (for
	// example the broker could not be reached). When that error means the
	// broker is unavailable and the per-message results are filled in, a nil
	// result still marks a confirmed message, which is then not sent again;
	// otherwise the per-message results are ignored. Each message's context
	// is the poller's.
	PublishBatch(topic string, msgs ...*message.Message) ([]error, error)
}

// The second stage of a batch's path: the send (docs/design.md, "The
// relay"). One sender serves every loop and Drain; it holds no state
// between two batches.

// sender publishes claimed batches to the broker.
type sender struct {
	pub           message.Publisher
	clock         oncebox.Clock
	isUnavailable func(error) bool // Config.IsUnavailable
	mbpt          time.Duration    // outbox.max-batch-processing-time
	tracer        trace.Tracer
	propagator    propagation.TextMapPropagator
}

// sent is a batch after its send: each event's result, and the error that
// released events of it without an attempt, if any.
type sent struct {
	results     []result
	unavailable error
}

// sendBatch sends the events of b with ctx, unless ctx has ended (closing:
// CloseTimeout passed while the batch before was being sent) or the batch
// sent just before on the same path found the broker unavailable (before):
// then b is released unsent, without an attempt. A send that ctx cut short
// counts no attempt for anything not confirmed: a failure may be the
// cancellation, not a rejection. cut is the reason given for the events so
// released; nil gives ctx's own error.
func (s *sender) sendBatch(ctx context.Context, b batch, before, cut error) sent {
	cutErr := func() error {
		if cut != nil {
			return cut
		}
		return ctx.Err()
	}
	var results []result
	switch {
	case ctx.Err() != nil:
		results = unsent(len(b.events), cutErr())
	case before != nil:
		// The broker went away under the batch before: this one, claimed
		// meanwhile, is released unsent, without an attempt.
		results = unsent(len(b.events), before)
	default:
		results = s.send(ctx, b.eventType, b.events)
	}
	if ctx.Err() != nil {
		for i := range results {
			if results[i].outcome == outcomeFailed {
				results[i] = result{outcome: outcomeUnavailable, err: cutErr()}
			}
		}
	}
	out := sent{results: results}
	for _, r := range results {
		if r.outcome == outcomeUnavailable {
			out.unavailable = r.err
		}
	}
	return out
}

// unsent is the results of n events released without being sent.
func unsent(n int, err error) []result {
	results := make([]result, n)
	for i := range results {
		results[i] = result{outcome: outcomeUnavailable, err: err}
	}
	return results
}

// outcome is the fate of one claimed event after a send.
type outcome int

const (
	outcomeConfirmed   outcome = iota + 1
	outcomeFailed              // rejected: counts an attempt
	outcomeUnavailable         // not attempted, or the broker was unreachable
)

type result struct {
	outcome outcome
	err     error
}

// toMessage rebuilds the Watermill message of a claimed row of eventType:
// its UUID, payload and metadata (the caller's headers, the key, the trace
// context), to which it adds the event id and type from the row's columns.
// The publisher does not store them in the metadata (issue 28: narrower
// rows); rows written before it did hold the same values, which these
// replace.
func toMessage(ctx context.Context, e *dialects.ClaimedEvent, eventType string) (*message.Message, error) {
	msg := message.NewMessage(e.MessageUUID, e.Payload)
	if len(e.Metadata) > 0 {
		// metadata.Decode leaves what it is given as json.Unmarshal would
		// leave msg.Metadata, the empty map NewMessage made, without its
		// reflection (issue 28: most of the relay's CPU in a no-op drain).
		md, err := metadata.Decode(e.Metadata)
		if err != nil {
			return nil, fmt.Errorf("event %s: metadata is not a JSON object of strings: %w", e.ID, err)
		}
		msg.Metadata = md // nil for the JSON null: WithColumns makes a map
	}
	msg.Metadata = metadata.WithColumns(msg.Metadata, e.ID, eventType)
	msg.SetContext(ctx)
	return msg, nil
}

// send publishes the claimed events, grouped by topic in claim order, and
// returns the fate of each. Once the broker is found unreachable the
// remaining groups are not attempted. When a plain publisher fails a
// multi-message call with an error that IsUnavailable does not know, its
// messages are sent again one by one (sendOneByOne). A panic of the
// publisher is a failed send, never a crash.
func (s *sender) send(ctx context.Context, eventType string, events []dialects.ClaimedEvent) []result {
	results := make([]result, len(events))
	msgs := make([]*message.Message, len(events))
	for i := range events {
		msg, err := toMessage(ctx, &events[i], eventType)
		if err != nil {
			results[i] = result{outcome: outcomeFailed, err: err}
			continue
		}
		msgs[i] = msg
	}
	unavailable := error(nil)
	_, isBatch := s.pub.(BatchPublisher)
	started, mbpt := s.clock.Now(), s.mbpt
	for start := 0; start < len(events); {
		topic := events[start].Topic
		var idx []int
		end := start
		for end < len(events) && events[end].Topic == topic {
			if msgs[end] != nil {
				idx = append(idx, end)
			}
			end++
		}
		start = end
		if len(idx) == 0 {
			continue
		}
		if unavailable != nil {
			for _, i := range idx {
				results[i] = result{outcome: outcomeUnavailable, err: unavailable}
			}
			continue
		}
		group := make([]*message.Message, len(idx))
		for k, i := range idx {
			group[k] = msgs[i]
		}
		span := s.startSendSpan(ctx, topic, group)
		perMsg, callErr := s.publish(topic, group)
		switch {
		case callErr != nil && (s.isUnavailable(callErr) || ctx.Err() != nil):
			unavailable = callErr
			for k, i := range idx {
				// A publisher that still reports per message tells which
				// messages the broker confirmed before it went away: keep
				// those, so they are not sent again.
				if len(perMsg) == len(idx) && perMsg[k] == nil {
					results[i] = result{outcome: outcomeConfirmed}
					continue
				}
				results[i] = result{outcome: outcomeUnavailable, err: callErr}
			}
		case callErr != nil && !isBatch && len(idx) > 1 && s.clock.Since(started) < mbpt:
			// A plain publisher's error does not say which message it is
			// about: find out one message at a time.
			if err := s.sendOneByOne(ctx, topic, idx, msgs, results, started); err != nil {
				unavailable = err
			}
		case callErr != nil:
			for _, i := range idx {
				results[i] = result{outcome: outcomeFailed, err: callErr}
			}
		default:
			for k, i := range idx {
				switch e := perMsg[k]; {
				case e == nil:
					results[i] = result{outcome: outcomeConfirmed}
				case s.isUnavailable(e):
					// The connection went away under this message: it was not
					// refused, so it counts no attempt, and the next topics of
					// the batch are not tried.
					results[i] = result{outcome: outcomeUnavailable, err: e}
					unavailable = e
				default:
					results[i] = result{outcome: outcomeFailed, err: e}
				}
			}
		}
		endSendSpan(span, idx, results, callErr)
	}
	return results
}

// errRefusedInARow wraps the error of the second of two messages in a row
// that a plain publisher refused one by one: the broker refuses everything
// for now, which is an outage, not a series of rejections.
var errRefusedInARow = errors.New("oncebox: two messages in a row refused one by one, taken as a broker outage")

// sendOneByOne is what follows a multi-message call of a plain
// message.Publisher that failed with an error IsUnavailable does not know:
// the error is the fate of the whole call and does not say which message
// it is about, so each message is sent again alone, in claim order, to
// learn its own fate. A message refused alone counts an attempt (a poison
// message ends FAILED on its schedule while the others of its batch are
// delivered), unless the message before it was refused alone too: then
// the broker refuses everything, the batch is an outage, and that message
// and the rest are released without an attempt. So a failing batch counts
// one attempt (its first message refused alone), not one per message, and
// no input can make events loop without an attempt: every such batch
// counts one, on the oldest message that fails.
//
// Messages the failed call delivered before its error (watermill-kafka's
// publisher sends one at a time and stops at the first error) are sent
// again: duplicates, which at-least-once delivery allows and the consumer's
// inbox drops. It returns the error that released the rest, if any.
func (s *sender) sendOneByOne(ctx context.Context, topic string, idx []int, msgs []*message.Message, results []result, started time.Time) error {
	mbpt := s.mbpt
	release := func(from int, err error) error {
		for _, i := range idx[from:] {
			results[i] = result{outcome: outcomeUnavailable, err: err}
		}
		return err
	}
	refusedBefore := false
	for k, i := range idx {
		if err := ctx.Err(); err != nil {
			return release(k, err)
		}
		if s.clock.Since(started) >= mbpt {
			// The claim may be recovered and sent by another instance from
			// now on: stop sending it.
			return release(k, fmt.Errorf("oncebox: not attempted: the batch's sends outlasted max-batch-processing-time %s", mbpt))
		}
		_, err := s.publish(topic, msgs[i:i+1])
		switch {
		case err == nil:
			results[i] = result{outcome: outcomeConfirmed}
			refusedBefore = false
		case s.isUnavailable(err) || ctx.Err() != nil:
			return release(k, err)
		case refusedBefore:
			return release(k, fmt.Errorf("%w: %w", errRefusedInARow, err))
		default:
			results[i] = result{outcome: outcomeFailed, err: err}
			refusedBefore = true
		}
	}
	return nil
}

// publish sends one topic's messages. It returns per-message errors (all nil
// when the plain publisher succeeded) or the call's error.
func (s *sender) publish(topic string, msgs []*message.Message) (perMsg []error, err error) {
	defer func() {
		if r := recover(); r != nil {
			perMsg, err = nil, fmt.Errorf("oncebox: publisher panicked: %v", r)
		}
	}()
	if bp, ok := s.pub.(BatchPublisher); ok {
		perMsg, err = bp.PublishBatch(topic, msgs...)
		if len(perMsg) != len(msgs) {
			if err == nil {
				err = fmt.Errorf("oncebox: PublishBatch returned %d results for %d messages", len(perMsg), len(msgs))
			}
			perMsg = nil
		}
		return perMsg, err
	}
	if err := s.pub.Publish(topic, msgs...); err != nil {
		return nil, err
	}
	return make([]error, len(msgs)), nil
}

// errClosing is the reason given for a batch released because the poller
// was closing.
var errClosing = errors.New("oncebox: poller closing")
