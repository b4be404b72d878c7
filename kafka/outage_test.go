package kafka_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/poller"
)

// downCluster returns the addresses of a Kafka cluster that is down, and a
// function that starts it there, with opts, for the rest of the test.
func downCluster(t *testing.T, opts ...kfake.Opt) (addrs []string, start func() []string) {
	t.Helper()
	first, addrs := newCluster(t)
	first.Close() // its port stays free for the cluster started later
	_, port, err := net.SplitHostPort(addrs[0])
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return addrs, func() []string {
		_, again := newCluster(t, append([]kfake.Opt{kfake.Ports(p)}, opts...)...)
		require.Equal(t, addrs, again)
		return again
	}
}

// A relay restarted during an outage needs no retry loop of its own:
// NewPublisher does not contact the cluster, calls fail as unavailable until
// it is back, then succeed on the same Publisher.
func TestPublisherStartsWithoutBroker(t *testing.T) {
	t.Parallel()
	addrs, start := downCluster(t, kfake.SeedTopics(1, "orders"))
	pub := newPublisher(t, addrs, fastFailConfig())

	ctx := context.Background()
	err := pub.ProbeBroker(ctx)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.ErrorIs(t, err, sarama.ErrOutOfBrokers)
	results, err := pub.PublishBatch("orders", event(t, "e", "a", []byte("during")))
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.ErrorIs(t, err, sarama.ErrOutOfBrokers)
	require.ErrorIs(t, results[0], oncebox.ErrBrokerUnavailable)

	start()
	require.NoError(t, pub.ProbeBroker(ctx))
	require.NoError(t, pub.Publish("orders", event(t, "e", "a", []byte("after"))))
	require.Equal(t, "after", string(readRecords(t, addrs, "orders", 1)[0].Value))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, pub.ProbeBroker(cancelled), oncebox.ErrBrokerUnavailable)
}

// Close of a Publisher that never reached the cluster closes nothing and
// leaks nothing (goleak checks); later calls fail as closed.
func TestCloseWithoutProducer(t *testing.T) {
	t.Parallel()
	addrs, _ := downCluster(t)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs, SaramaConfig: fastFailConfig()}, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	require.ErrorIs(t, pub.ProbeBroker(context.Background()), oncebox.ErrClosed)
	_, err = pub.PublishBatch("orders", event(t, "e", "a", nil))
	require.ErrorIs(t, err, oncebox.ErrClosed)
}

// TestRelayStartsDuringAnOutage runs the real relay (poller.New and Run)
// while the cluster is down; events committed meanwhile are all delivered
// once it comes up, with their keys, none FAILED and no attempt counted.
func TestRelayStartsDuringAnOutage(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	addrs, start := downCluster(t, kfake.SeedTopics(3, "orders"))
	pub := newPublisher(t, addrs, fastFailConfig())

	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{Polling: oncebox.PollingSettings{
			MinFixedDelay: 5 * time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}},
		Events: map[string]oncebox.EventSettings{"order-created": {Topic: "orders"}},
	}}
	hooks := &pollertest.Hooks{}
	p, err := poller.New(s.Beginner, pub, poller.Config{
		Dialect: s.Dialect, Oncebox: cfg, Hooks: hooks,
		OutageBackoff: poller.Schedule{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2},
	}, watermill.NopLogger{})
	require.NoError(t, err, "the relay starts while the cluster is down")
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	<-p.Running()

	msgs := commitEvents(t, s, cfg, 40, "n")
	require.Eventually(t, func() bool { _, _, u := hooks.Counts(); return u >= 1 }, 20*time.Second, 10*time.Millisecond,
		"the poller met the outage")

	start()
	events := s.Dialect.Tables().Events
	require.Eventually(t, func() bool { return s.Count(t, events, "status = 'PROCESSED'") == len(msgs) },
		30*time.Second, 10*time.Millisecond)
	require.Zero(t, s.Count(t, events, "status = 'FAILED'"))
	require.Zero(t, s.Count(t, events, "retry_count > 0"), "an outage counts no attempt")
	sent, failed, _ := hooks.Counts()
	require.Equal(t, len(msgs), sent)
	require.Zero(t, failed)

	want := map[string]string{} // event id → key
	for _, m := range msgs {
		want[m.Metadata.Get(oncebox.HeaderEventID)] = oncebox.Key(m)
	}
	for _, r := range readRecords(t, addrs, "orders", len(msgs)) {
		id := headers(t, r)[oncebox.HeaderEventID]
		key, ok := want[id]
		require.True(t, ok, "event %s delivered once", id)
		delete(want, id)
		require.Equal(t, key, string(r.Key))
	}
	require.Empty(t, want)
}
