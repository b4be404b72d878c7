package rabbitmq_test

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// keyedEvents is n events over the keys "key-0" … "key-<keys-1>", in turn.
func keyedEvents(n, keys int) []*message.Message {
	msgs := events(n)
	for i, m := range msgs {
		oncebox.SetKey(m, fmt.Sprintf("key-%d", i%keys))
	}
	return msgs
}

// unkeyed removes the ordering key of msgs.
func unkeyed(msgs []*message.Message) []*message.Message {
	for _, m := range msgs {
		oncebox.SetKey(m, "")
	}
	return msgs
}

// channelsOf counts the channels the broker has open on the connection
// named name, with rabbitmqctl (see connectionPIDs).
func channelsOf(t *testing.T, name string) int {
	t.Helper()
	pids := connectionPIDs(t, name)
	require.Len(t, pids, 1, "one connection named %s", name)
	out, err := exec.Command("rabbitmqctl", "-q", "list_channels", "connection").CombinedOutput()
	require.NoError(t, err, "%s", out)
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == pids[0] {
			n++
		}
	}
	return n
}

// newNamedPublisher declares a fresh queue and builds a publisher whose
// connection has a name of its own, to count its channels (channelsOf).
func newNamedPublisher(t *testing.T, conn *amqp.Connection, prefix string, cfg rabbitmq.PublisherConfig) (queue, name string, pub *rabbitmq.Publisher) {
	t.Helper()
	queue = uniqueName(t, prefix)
	declareQueue(t, conn, queue)
	cfg.ConnectionName = uniqueName(t, prefix+"-conn")
	return queue, cfg.ConnectionName, newPublisher(t, cfg)
}

// A batch is spread over the call's channels by key: each key's messages
// arrive in order, across calls too.
func TestEachKeyKeepsItsOrderOverTheChannels(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue, name, pub := newNamedPublisher(t, conn, "oncebox-test-keys", rabbitmq.PublisherConfig{Channels: 1})

	var sent []*message.Message
	for range 3 {
		msgs := keyedEvents(400, 97)
		results, err := pub.PublishBatch(queue, msgs...)
		require.NoError(t, err)
		require.Equal(t, make([]error, len(msgs)), results)
		sent = append(sent, msgs...)
	}
	requireOrderPerKey(t, sent, drain(t, conn, queue, len(sent)))
	require.Equal(t, 4, channelsOf(t, name), "one call on the default four channels")
}

// Unkeyed messages stay on one channel, in batch order, unless
// SpreadUnkeyed.
func TestUnkeyedMessagesKeepBatchOrderUnlessSpread(t *testing.T) {
	t.Parallel()
	conn := admin(t)

	t.Run("default", func(t *testing.T) {
		t.Parallel()
		queue, name, pub := newNamedPublisher(t, conn, "oncebox-test-unkeyed", rabbitmq.PublisherConfig{Channels: 1})

		msgs := unkeyed(events(300))
		results, err := pub.PublishBatch(queue, msgs...)
		require.NoError(t, err)
		require.Equal(t, make([]error, len(msgs)), results)
		require.Equal(t, 1, channelsOf(t, name), "unkeyed messages on one channel")

		// Mixed: the unkeyed ones in batch order, each key's in order.
		mixed := keyedEvents(300, 13)
		unkeyed(mixed[:100])
		unkeyed(mixed[200:250])
		results, err = pub.PublishBatch(queue, mixed...)
		require.NoError(t, err)
		require.Equal(t, make([]error, len(mixed)), results)
		requireOrderPerKey(t, append(msgs, mixed...), drain(t, conn, queue, len(msgs)+len(mixed)))
	})

	t.Run("SpreadUnkeyed", func(t *testing.T) {
		t.Parallel()
		queue, name, pub := newNamedPublisher(t, conn, "oncebox-test-unkeyed-spread", rabbitmq.PublisherConfig{Channels: 1, SpreadUnkeyed: true})

		msgs := unkeyed(events(300))
		results, err := pub.PublishBatch(queue, msgs...)
		require.NoError(t, err)
		require.Equal(t, make([]error, len(msgs)), results)
		require.Equal(t, 4, channelsOf(t, name), "unkeyed messages over the four channels")
		got := drain(t, conn, queue, len(msgs))
		want := map[string]bool{}
		for _, m := range msgs {
			want[m.UUID] = true
		}
		for _, d := range got {
			require.True(t, want[d.MessageId], "message %s sent once", d.MessageId)
			delete(want, d.MessageId)
		}
	})
}

// A message the broker refuses with a channel exception, in the middle of
// its channel's share of the batch: the broker closes that channel and
// drops what followed; the publisher resends that channel's unconfirmed
// messages one by one. Only the culprit fails; the other channels' messages,
// confirmed meanwhile, are untouched, and every key keeps its order.
func TestChannelClosedMidBatchFailsOnlyTheRefusedMessage(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-refused")
	declareQueue(t, conn, queue)
	pub := newPublisher(t, rabbitmq.PublisherConfig{Channels: 1})

	msgs := keyedEvents(400, 40)
	const culprit = 201
	// RabbitMQ reads a CC header as sender-selected routing keys and closes
	// the channel when it is not an array: 406 PRECONDITION_FAILED.
	msgs[culprit].Metadata.Set("CC", "not-an-array")
	results, err := pub.PublishBatch(queue, msgs...)
	require.NoError(t, err, "the broker was reached: per-message results")
	for i, r := range results {
		if i == culprit {
			require.ErrorIs(t, r, rabbitmq.ErrChannelClosed)
			require.Contains(t, r.Error(), "406")
			require.NotErrorIs(t, r, oncebox.ErrBrokerUnavailable)
			continue
		}
		require.NoError(t, r, "message %d", i)
	}
	// Messages routed before the culprit but unconfirmed when the channel
	// closed were sent again: the first copy of each is in order.
	sent := append(append([]*message.Message{}, msgs[:culprit]...), msgs[culprit+1:]...)
	requireOrderPerKey(t, sent, drainDistinct(t, conn, queue, len(sent)))

	results, err = pub.PublishBatch(queue, keyedEvents(40, 40)...)
	require.NoError(t, err)
	require.Equal(t, make([]error, 40), results, "the closed channel was replaced")
}

// Many calls at once with fewer free channels than they would like: a call
// holds one slot of ChannelsPerCall channels and never waits for another,
// so all of them end, and the connection never holds more than Channels ×
// ChannelsPerCall channels.
func TestManyCallsOnFewSlotsAllEnd(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue, name, pub := newNamedPublisher(t, conn, "oncebox-test-few-slots", rabbitmq.PublisherConfig{Channels: 2, ChannelsPerCall: 8})

	const goroutines, calls, size = 8, 4, 100
	errs := make(chan error, goroutines*calls*(size+1)) // each call: its error and its results
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				results, err := pub.PublishBatch(queue, keyedEvents(size, 50)...)
				errs <- err
				for _, r := range results {
					errs <- r
				}
			}
		}()
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(2 * time.Minute): // a deadlock, not a speed limit
		t.Fatal("calls still waiting after 2 minutes")
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	drain(t, conn, queue, goroutines*calls*size)
	require.LessOrEqual(t, channelsOf(t, name), 2*8)
}

func TestNewPublisherValidatesChannelsPerCall(t *testing.T) {
	t.Parallel()
	_, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: brokerURL(), ChannelsPerCall: -1}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.Contains(t, err.Error(), "ChannelsPerCall must be > 0, got -1")

	_, err = rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: brokerURL(), Channels: 64, ChannelsPerCall: 64}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.Contains(t, err.Error(), "Channels × ChannelsPerCall must be at most 2047 (channel_max), got 64 × 64")

	p, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: brokerURL(), Channels: 2047, ChannelsPerCall: 1}, nil)
	require.NoError(t, err)
	require.NoError(t, p.Close())
}
