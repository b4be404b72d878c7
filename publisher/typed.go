package publisher

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// MessageOption adjusts a message built by PublishJSON or Emit before it is
// written.
type MessageOption func(*message.Message)

// WithKey sets the ordering key (the Kafka message key) of the event.
func WithKey(key string) MessageOption {
	return func(m *message.Message) { oncebox.SetKey(m, key) }
}

// WithMetadata sets one metadata entry of the event.
func WithMetadata(key, value string) MessageOption {
	return func(m *message.Message) { m.Metadata.Set(key, value) }
}

// PublishJSON marshals v to JSON and publishes it through p as one event of
// eventType, in p's transaction. It returns the message written; its metadata
// holds the new event id (oncebox_event_id).
func PublishJSON(ctx context.Context, p *Publisher, eventType string, v any, opts ...MessageOption) (*message.Message, error) {
	msg, err := newJSONMessage(ctx, v, opts)
	if err != nil {
		return nil, fmt.Errorf("publish to %q: %w", eventType, err)
	}
	if err := p.Publish(eventType, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func newJSONMessage(ctx context.Context, v any, opts []MessageOption) (*message.Message, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: payload %T cannot be marshalled to JSON: %v", oncebox.ErrInvalidInput, v, err)
	}
	msg := message.NewMessage(watermill.NewUUID(), payload)
	msg.Metadata.Set("content_type", "application/json")
	msg.SetContext(ctx)
	for _, o := range opts {
		o(msg)
	}
	return msg, nil
}

// TxFunc is a function that does its work in the transaction it is given.
type TxFunc[In, Out any] func(ctx context.Context, tx sql.ContextExecutor, in In) (Out, error)

// EmitOptions choose what Emit publishes. The zero value publishes the
// function's result as JSON without a key.
type EmitOptions[In, Out any] struct {
	// Payload picks the value to publish, for example a field of the input,
	// instead of the function's result. It runs only when the function
	// succeeded.
	Payload func(in In, out Out) any
	// Key returns the ordering key of the event; "" for none.
	Key func(in In, out Out) string
	// Message adds further options, such as metadata.
	Message []MessageOption
}

// Emit wraps fn, which already runs in its caller's transaction, so that its
// result is published as an event of eventType in the same transaction when,
// and only when, fn returns no error: the business change and its event
// commit together, with no Publish call in fn.
//
// The returned function builds a Publisher over tx with config at each call;
// tx must be the caller's open transaction (see NewPublisher). An error of
// fn is returned as it is and nothing is published; an error of the publish is
// returned so that the caller rolls the transaction back.
func Emit[In, Out any](config Config, eventType string, fn TxFunc[In, Out], opts ...EmitOptions[In, Out]) TxFunc[In, Out] {
	var o EmitOptions[In, Out]
	if len(opts) > 0 {
		o = opts[0]
	}
	return func(ctx context.Context, tx sql.ContextExecutor, in In) (Out, error) {
		out, err := fn(ctx, tx, in)
		if err != nil {
			return out, err
		}
		var payload any = out
		if o.Payload != nil {
			payload = o.Payload(in, out)
		}
		msgOpts := o.Message
		if o.Key != nil {
			msgOpts = append(append([]MessageOption(nil), msgOpts...), WithKey(o.Key(in, out)))
		}
		pub, err := NewPublisher(tx, config, nil)
		if err != nil {
			return out, err
		}
		if _, err := PublishJSON(ctx, pub, eventType, payload, msgOpts...); err != nil {
			return out, err
		}
		return out, nil
	}
}
