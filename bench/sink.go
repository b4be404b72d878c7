package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// countdown counts events and closes done once it reaches its target. It is
// safe for concurrent use.
type countdown struct {
	n      atomic.Int64
	target int64
	done   chan struct{}
	once   sync.Once
}

func newCountdown(target int) *countdown {
	return &countdown{target: int64(target), done: make(chan struct{})}
}

func (c *countdown) add(k int) {
	if c.n.Add(int64(k)) >= c.target {
		c.once.Do(func() { close(c.done) })
	}
}

func (c *countdown) count() int { return int(c.n.Load()) }

// wait blocks until the target is reached or ctx ends; the error then says
// how far the count got.
func (c *countdown) wait(ctx context.Context, what string) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %d of %d before the deadline: %w", what, c.count(), c.target, ctx.Err())
	}
}

// sink is the no-op broker every relay publishes to: it counts the messages
// it is given and, when onMsg is set, shows each one to it. It is safe for
// concurrent use, as a message.Publisher must be.
type sink struct {
	*countdown
	onMsg func(*message.Message)
}

var _ message.Publisher = (*sink)(nil)

// newSink returns a sink whose countdown completes after target messages.
func newSink(target int, onMsg func(*message.Message)) *sink {
	return &sink{countdown: newCountdown(target), onMsg: onMsg}
}

// Publish implements message.Publisher.
func (s *sink) Publish(_ string, msgs ...*message.Message) error {
	if s.onMsg != nil {
		for _, m := range msgs {
			s.onMsg(m)
		}
	}
	s.add(len(msgs))
	return nil
}

// Close implements message.Publisher.
func (s *sink) Close() error { return nil }

// sentHooks counts the events pollers report as sent, i.e. confirmed by the
// publisher and marked PROCESSED: the end of a relay's work on a row.
type sentHooks struct {
	poller.NopHooks
	sent *countdown
}

// Sent implements poller.Hooks.
func (h sentHooks) Sent(_ string, ids []oncebox.EventID) { h.sent.add(len(ids)) }

// orderKeepingSink is a sink that says it keeps a key's order within one
// call (poller.KeyOrderKeeper), as the kafka package's publisher does
// with its recommended config.
type orderKeepingSink struct{ *sink }

// KeepsKeyOrder implements poller.KeyOrderKeeper.
func (orderKeepingSink) KeepsKeyOrder() bool { return true }

// PublishBatch implements poller.BatchPublisher, which a KeyOrderKeeper
// must be: every message confirmed.
func (s orderKeepingSink) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	return make([]error, len(msgs)), s.Publish(topic, msgs...)
}
