package poller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// onePerCall is a plain message.Publisher that sends one message at a time
// to a recorder and stops at the first it refuses, as watermill-kafka's
// publisher does: the messages before the refused one are delivered, the
// call fails, and its error does not say which message it was about.
type onePerCall struct {
	rec    *recorder
	refuse func(*message.Message) error

	mu    sync.Mutex
	calls []int // messages per call
}

func (o *onePerCall) Publish(topic string, msgs ...*message.Message) error {
	o.mu.Lock()
	o.calls = append(o.calls, len(msgs))
	o.mu.Unlock()
	for _, m := range msgs {
		if err := o.refuse(m); err != nil {
			return fmt.Errorf("cannot produce message %s: %w", m.UUID, err)
		}
		if err := o.rec.Publish(topic, m); err != nil {
			return err
		}
	}
	return nil
}

func (o *onePerCall) Close() error { return nil }

func (o *onePerCall) callSizes() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.calls...)
}

// A poison message sent through a plain publisher that refuses only it
// still ends FAILED after max-retries, while the other messages of its
// batch are delivered and count no attempt. Before, the whole call's error
// counted an attempt for every message of the batch, and all five ended
// FAILED.
func TestPlainPublisherPoisonMessageEndsFailedWhileItsBatchIsDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.publish(t, b.clock, "order-created", 5)
	events := b.schema.Dialect.Tables().Events
	_, err := b.schema.Pool.Exec(context.Background(), "UPDATE "+events+" SET payload = 'poison' WHERE id = $1", ids[2])
	require.NoError(t, err)

	rec := newRecorder()
	pub := &onePerCall{rec: rec, refuse: func(m *message.Message) error {
		if string(m.Payload) == "poison" {
			return errors.New("kafka server: message was too large")
		}
		return nil
	}}
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Oncebox.Outbox.Defaults.MaxRetries = oncebox.Int(1)
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, pub, cfg, nil)
	require.NoError(t, err)
	start(t, p)

	stepUntil(t, b.clock, 3, 250*time.Millisecond, 10*time.Minute, func() bool {
		return b.schema.Count(t, events, "status = 'FAILED'") == 1 && b.status(t, "PROCESSED") == 4
	})
	require.Equal(t, 1, b.schema.Count(t, events, "id = $1 AND status = 'FAILED' AND retry_count = 2", ids[2]),
		"max-retries 1: two attempts, both counted on the poison message")
	require.Equal(t, 4, b.schema.Count(t, events, "status = 'PROCESSED' AND retry_count = 0"), "the others count no attempt")
	failures := h.Snapshot().Failures
	require.Len(t, failures, 2)
	for _, f := range failures {
		require.Equal(t, ids[2], f.ID.String())
		require.ErrorContains(t, f.Err, "message was too large")
	}
	got := rec.deliveries()
	require.Zero(t, got[ids[2]], "the poison message is never delivered")
	for _, id := range []string{ids[0], ids[1], ids[3], ids[4]} {
		require.Positive(t, got[id], "event %s delivered", id)
	}
	// The first two were delivered by the failed call, then again alone:
	// duplicates, which at-least-once delivery allows.
	require.Equal(t, 2, got[ids[0]])
	require.Equal(t, 2, got[ids[1]])
	require.Equal(t, []int{5, 1, 1, 1, 1, 1}, pub.callSizes()[:6], "the call of five, then one message per call")
}

// A plain publisher whose every call fails with an error nobody classified
// (an HTTP gateway's 503 here) is an outage: each failing batch counts one
// attempt, on its first message, not one per message, and releases the
// rest; once the broker is back every event is delivered. Before, the
// first poll counted an attempt for each of the five.
func TestPlainPublisherUnknownOutageCountsOneAttemptPerBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 5)
	events := b.schema.Dialect.Tables().Events
	var mu sync.Mutex
	down := true
	rec := newRecorder()
	pub := &onePerCall{rec: rec, refuse: func(*message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return errors.New("gateway answered 503 Service Unavailable")
		}
		return nil
	}}
	h := &hooks{}
	cfg := b.config("order-created")
	cfg.Hooks = h
	p, err := poller.New(b.schema.Beginner, pub, cfg, nil)
	require.NoError(t, err)
	start(t, p)

	firstPoll := func() (poller.PollInfo, bool) {
		for _, pi := range h.Snapshot().Polls {
			if pi.EventType == "order-created" && pi.Claimed > 0 {
				return pi, true
			}
		}
		return poller.PollInfo{}, false
	}
	stepUntil(t, b.clock, 3, 250*time.Millisecond, time.Minute, func() bool { _, ok := firstPoll(); return ok })
	require.Len(t, h.Snapshot().Failures, 1, "one attempt counted for the batch")
	require.Equal(t, 1, b.schema.Count(t, events, "status = 'PENDING' AND retry_count = 1"))
	require.Equal(t, 4, b.schema.Count(t, events, "status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL"), "the rest released")
	require.Equal(t, 1, h.Snapshot().Unavailable)
	require.Equal(t, []int{5, 1, 1}, pub.callSizes(), "the call, then the first alone, then the second alone")
	first, _ := firstPoll()
	require.Equal(t, 5, first.Claimed)
	require.GreaterOrEqual(t, first.NextDelay, time.Second, "the type backs off as in an outage (OutageBackoff.Min)")

	mu.Lock()
	down = false
	mu.Unlock()
	stepUntil(t, b.clock, 3, time.Second, 10*time.Minute, func() bool { return b.status(t, "PROCESSED") == 5 })
	require.Len(t, h.Snapshot().Failures, 1)
	require.Len(t, rec.deliveries(), 5)
}
