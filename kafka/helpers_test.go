package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// newCluster starts an in-process Kafka (kfake, the real wire protocol) on
// 127.0.0.1 and closes it when the test ends.
func newCluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// fastFailConfig is RecommendedSaramaConfig with the timeouts cut so that a
// closed cluster fails a send within seconds.
func fastFailConfig() *sarama.Config {
	cfg := kafka.RecommendedSaramaConfig()
	cfg.Net.DialTimeout = time.Second
	cfg.Net.ReadTimeout = 2 * time.Second
	cfg.Net.WriteTimeout = 2 * time.Second
	cfg.Metadata.Timeout = 2 * time.Second
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	return cfg
}

// newPublisher builds a Publisher on addrs and closes it when the test ends.
func newPublisher(t testing.TB, addrs []string, cfg *sarama.Config) *kafka.Publisher {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs, SaramaConfig: cfg}, watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	return pub
}

// readRecords reads n records of topic from the start with franz-go.
func readRecords(t testing.TB, addrs []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", len(recs), n, topic)
		for _, e := range fs.Errors() {
			require.NoError(t, e.Err, "fetch %s/%d", e.Topic, e.Partition)
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// headers returns the headers of r as a map, failing on a repeated key.
func headers(t testing.TB, r *kgo.Record) map[string]string {
	t.Helper()
	h := map[string]string{}
	for _, kv := range r.Headers {
		_, dup := h[kv.Key]
		require.False(t, dup, "header %s repeated", kv.Key)
		h[kv.Key] = string(kv.Value)
	}
	return h
}
