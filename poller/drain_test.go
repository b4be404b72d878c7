package poller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

func TestDrainSendsEveryDueEventOfConfiguredAndDiscoveredTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.publish(t, b.clock, "order-created", 450) // three batches of the default 200
	shipped := b.publish(t, b.clock, "order-shipped", 3)   // configured by nobody: discovered
	rec := newRecorder()
	h := &hooks{}
	cfg := poller.Config{Dialect: b.schema.Dialect, Clock: b.clock, EventTypes: []string{"order-created"}, Hooks: h}
	p, err := poller.New(b.schema.Beginner, rec, cfg, nil)
	require.NoError(t, err)

	sent, err := p.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 453, sent)
	require.Equal(t, 453, b.status(t, "PROCESSED"))
	got := rec.deliveries()
	for _, id := range append(created, shipped...) {
		require.Equal(t, 1, got[id], "event %s", id)
	}
	require.Equal(t, created, rec.order[:450], "one type's events are sent in publish order")
	require.Equal(t, 453, h.Snapshot().Sent, "the hooks hear of a drain as of a poll")

	sent, err = p.Drain(context.Background())
	require.NoError(t, err)
	require.Zero(t, sent, "nothing is due any more")
}

func TestDrainReportsRefusedEventsAndCountsTheirAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.publish(t, b.clock, "order-created", 1)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error { return errors.New("record too large") }
	p, err := poller.New(b.schema.Beginner, rec, b.config("order-created"), nil)
	require.NoError(t, err)

	sent, err := p.Drain(context.Background())
	require.Zero(t, sent)
	require.ErrorContains(t, err, fmt.Sprintf("event %s of type \"order-created\"", ids[0]))
	require.ErrorContains(t, err, "refused by the publisher, attempt 1: record too large")
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().Events, "status = 'PENDING' AND retry_count = 1"),
		"the refusal counts an attempt and the event waits for its retry")
}

func TestDrainStopsWhenTheBrokerIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, b.clock, "order-created", 2)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error { return fmt.Errorf("dial: %w", oncebox.ErrBrokerUnavailable) }
	p, err := poller.New(b.schema.Beginner, rec, b.config("order-created"), nil)
	require.NoError(t, err)

	sent, err := p.Drain(context.Background())
	require.Zero(t, sent)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.ErrorContains(t, err, `2 events of type "order-created" released`)
	require.Equal(t, 2, b.schema.Count(t, b.schema.Dialect.Tables().Events, "status = 'PENDING' AND retry_count = 0"),
		"released without an attempt")
}

func TestDrainAfterCloseIsErrClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := poller.New(b.schema.Beginner, newRecorder(), b.config("order-created"), nil)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	_, err = p.Drain(context.Background())
	require.ErrorIs(t, err, oncebox.ErrClosed)
}
