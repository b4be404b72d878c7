// Package subscriber brings the inbox to code that consumes without a
// Watermill router: a message.Subscriber decorator that acks and drops
// duplicates, and a batch helper that records a batch of ids in one
// statement and keeps only the new messages.
package subscriber

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// InboxSubscriber wraps a message.Subscriber: each message goes through the
// inbox before it reaches the consumer, and duplicates are acked and dropped.
//
// In Transactional mode, the consumer receives a message whose context holds
// the inbox's transaction (middleware.TxFromContext and friends); acking it
// commits the id with the consumer's writes, nacking rolls both back and
// nacks the original, so the broker redelivers. The consumer must ack or nack
// every message, as with any Watermill subscriber; the next message of the
// subscription comes after that.
//
// The decorator records ids before any router handler runs, so they have
// no handler name: their namespace is the inbox's InboxConfig.Namespace, ""
// by default, and not one per handler as with the inbox's Middleware.
//
// A router reading this subscriber runs all of its middleware inside the
// inbox's transaction: with Watermill's Retry among them, a failed attempt's
// writes would commit with the next attempt's. The inbox finds Retry when
// the handler takes its transaction, rolls the message back and stops (see
// middleware.ErrRetryInsideInbox and InboxConfig.OnMisuse). Retry there is
// safe only if the handler does not write through the inbox's transaction.
type InboxSubscriber struct {
	sub    message.Subscriber
	inbox  *middleware.Inbox
	logger watermill.LoggerAdapter

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

var _ message.Subscriber = (*InboxSubscriber)(nil)

// errNacked is the handler error of a message the consumer nacked.
var errNacked = errors.New("oncebox: the consumer nacked the message")

// NewInboxSubscriber decorates sub with inbox. Closing the decorator closes
// sub.
func NewInboxSubscriber(sub message.Subscriber, inbox *middleware.Inbox, logger watermill.LoggerAdapter) (*InboxSubscriber, error) {
	if sub == nil || inbox == nil {
		return nil, fmt.Errorf("%w: inbox subscriber: the subscriber and the inbox are required", oncebox.ErrInvalidConfig)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &InboxSubscriber{sub: sub, inbox: inbox, logger: logger, closing: make(chan struct{})}, nil
}

// Subscribe subscribes to topic on the wrapped subscriber and returns the
// messages that are not duplicates.
func (s *InboxSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-s.closing:
		return nil, oncebox.ErrClosed
	default:
	}
	in, err := s.sub.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		for msg := range in {
			s.deliver(ctx, msg, out)
		}
	}()
	return out, nil
}

// deliver passes msg through the inbox; the "handler" hands a copy to the
// consumer and waits for its ack or nack.
func (s *InboxSubscriber) deliver(ctx context.Context, msg *message.Message, out chan<- *message.Message) {
	err := s.inbox.Process(msg, func(m *message.Message) error {
		fwd := m.CopyWithContext() // a copy: its ack is the consumer's, not the broker's
		select {
		case out <- fwd:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return oncebox.ErrClosed
		}
		select {
		case <-fwd.Acked():
			return nil
		case <-fwd.Nacked():
			return errNacked
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return oncebox.ErrClosed
		}
	})
	if err != nil {
		if !errors.Is(err, errNacked) {
			s.logger.Error("Inbox subscriber: message not processed, nacking", err, watermill.LogFields{
				"message_uuid": msg.UUID,
				"event_id":     msg.Metadata.Get(oncebox.HeaderEventID),
				"event_type":   msg.Metadata.Get(oncebox.HeaderEventType),
			})
		}
		msg.Nack()
		return
	}
	msg.Ack()
}

// Close stops delivering, closes the wrapped subscriber and waits for the
// subscriptions to end.
func (s *InboxSubscriber) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	err := s.sub.Close()
	s.wg.Wait()
	return err
}
