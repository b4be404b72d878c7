package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox/dialects"
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

// toMessage rebuilds the Watermill message of a claimed row: its UUID,
// payload and metadata (which holds the oncebox headers and the key).
func toMessage(ctx context.Context, e *dialects.ClaimedEvent) (*message.Message, error) {
	msg := message.NewMessage(e.MessageUUID, e.Payload)
	if len(e.Metadata) > 0 {
		if err := json.Unmarshal(e.Metadata, &msg.Metadata); err != nil {
			return nil, fmt.Errorf("event %s: metadata is not a JSON object of strings: %w", e.ID, err)
		}
	}
	msg.SetContext(ctx)
	return msg, nil
}

// send publishes the claimed events, grouped by topic in claim order, and
// returns the fate of each. Once the broker is found unreachable the
// remaining groups are not attempted. A panic of the publisher is a failed
// send, never a crash.
func (p *Poller) send(ctx context.Context, events []dialects.ClaimedEvent) []result {
	results := make([]result, len(events))
	msgs := make([]*message.Message, len(events))
	for i := range events {
		msg, err := toMessage(ctx, &events[i])
		if err != nil {
			results[i] = result{outcome: outcomeFailed, err: err}
			continue
		}
		msgs[i] = msg
	}
	unavailable := error(nil)
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
		span := p.startSendSpan(ctx, topic, group)
		perMsg, callErr := p.publish(topic, group)
		switch {
		case callErr != nil && (p.config.IsUnavailable(callErr) || ctx.Err() != nil):
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
		case callErr != nil:
			for _, i := range idx {
				results[i] = result{outcome: outcomeFailed, err: callErr}
			}
		default:
			for k, i := range idx {
				switch e := perMsg[k]; {
				case e == nil:
					results[i] = result{outcome: outcomeConfirmed}
				case p.config.IsUnavailable(e):
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

// publish sends one topic's messages. It returns per-message errors (all nil
// when the plain publisher succeeded) or the call's error.
func (p *Poller) publish(topic string, msgs []*message.Message) (perMsg []error, err error) {
	defer func() {
		if r := recover(); r != nil {
			perMsg, err = nil, fmt.Errorf("oncebox: publisher panicked: %v", r)
		}
	}()
	if bp, ok := p.pub.(BatchPublisher); ok {
		perMsg, err = bp.PublishBatch(topic, msgs...)
		if len(perMsg) != len(msgs) {
			if err == nil {
				err = fmt.Errorf("oncebox: PublishBatch returned %d results for %d messages", len(perMsg), len(msgs))
			}
			perMsg = nil
		}
		return perMsg, err
	}
	if err := p.pub.Publish(topic, msgs...); err != nil {
		return nil, err
	}
	return make([]error, len(msgs)), nil
}

// errClosing is the reason given for a batch released because the poller
// was closing.
var errClosing = errors.New("oncebox: poller closing")
