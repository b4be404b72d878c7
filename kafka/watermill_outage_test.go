package kafka_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// freePort is a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// startClusterOn starts a one-broker kfake cluster on port with topic
// seeded, closed when the test ends (Close may also be called before).
func startClusterOn(t testing.TB, port int, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// A forwarder user's publisher, watermill-kafka's own, as publisherOut with
// the default IsUnavailable: the cluster goes away while events wait, and
// comes back at the same address. The batches are released without an
// attempt while it is down, and every event is delivered once it is back:
// none FAILED, retry_count 0. Before, with max-retries 1, the Sarama errors
// counted an attempt per event and every event ended FAILED (the trial's
// 5 of 5).
func TestWatermillKafkaPublisherOutageCountsNoAttempt(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	port := freePort(t)
	const topic = "orders"
	cluster := startClusterOn(t, port, topic)
	addrs := []string{"127.0.0.1:" + strconv.Itoa(port)}

	// watermill-kafka's defaults, with the waits cut so that a closed
	// cluster fails a send within seconds.
	sc := wmkafka.DefaultSaramaSyncPublisherConfig()
	sc.Net.DialTimeout = 500 * time.Millisecond
	sc.Net.ReadTimeout = 2 * time.Second
	sc.Net.WriteTimeout = 2 * time.Second
	sc.Metadata.Retry.Backoff = 50 * time.Millisecond
	sc.Producer.Retry.Max = 3
	sc.Producer.Retry.Backoff = 50 * time.Millisecond
	pub, err := wmkafka.NewPublisher(wmkafka.PublisherConfig{Brokers: addrs, OverwriteSaramaConfig: sc}, watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	require.NoError(t, pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte(`{"warm-up":1}`))),
		"the producer is connected before the outage")

	cluster.Close() // the outage starts
	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{MaxRetries: oncebox.Int(1), Polling: oncebox.PollingSettings{
			MinFixedDelay: 5 * time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}},
		Events: map[string]oncebox.EventSettings{"order-created": {Topic: topic}},
	}}
	msgs := commitEvents(t, s, cfg, 5, "n")

	hooks := &pollertest.Hooks{}
	p, err := poller.New(s.Beginner, pub, poller.Config{Dialect: s.Dialect, Oncebox: cfg, Hooks: hooks,
		OutageBackoff: poller.Schedule{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2}}, watermill.NopLogger{})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	<-p.Running()

	events := s.Dialect.Tables().Events
	require.Eventually(t, func() bool { _, failed, u := hooks.Counts(); return u >= 3 || failed > 0 }, 60*time.Second, 10*time.Millisecond,
		"the poller tried the closed cluster")
	_, failed, _ := hooks.Counts()
	require.Zero(t, failed, "an outage counts no attempt")
	require.Zero(t, s.Count(t, events, "retry_count > 0 OR status = 'FAILED'"))

	startClusterOn(t, port, topic) // back, at the same address
	require.Eventually(t, func() bool { return s.Count(t, events, "status = 'PROCESSED'") == len(msgs) },
		60*time.Second, 10*time.Millisecond, "every event delivered once the cluster is back")
	_, failed, _ = hooks.Counts()
	require.Zero(t, failed)
	require.Zero(t, s.Count(t, events, "retry_count > 0 OR status = 'FAILED'"), "none FAILED, no attempt counted")

	// The new cluster holds every event (a message the producer sent as the
	// cluster closed may be there twice: at least once).
	want := map[string]bool{}
	for _, m := range msgs {
		want[m.UUID] = true
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "%d events not in the topic", len(want))
		for _, r := range fs.Records() {
			for _, h := range r.Headers {
				if h.Key == "_watermill_message_uuid" {
					delete(want, string(h.Value))
				}
			}
		}
	}
}
