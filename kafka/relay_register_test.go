package kafka_test

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/poller"
)

// This module teaches the relay's default classification watermill-kafka's
// own outage error, as its publisher returns it after Close (an
// errors.New value known by its text); a refusal stays one.
func TestRelayKnowsWatermillKafkaOutagesThroughThisModule(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	pub, err := kafkawm.NewPublisher(kafkawm.PublisherConfig{Brokers: addrs, Marshaler: kafka.KeyMarshaler(),
		OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()}, watermill.NopLogger{})
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	closed := pub.Publish("orders", message.NewMessage(watermill.NewUUID(), nil))
	require.Error(t, closed)
	require.True(t, poller.IsUnavailable(closed), "%v", closed)
	require.True(t, kafka.IsUnavailable(closed), "%v", closed)

	require.False(t, poller.IsUnavailable(fmt.Errorf("cannot produce message 42: %w",
		&sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: "orders"}, Err: sarama.ErrMessageSizeTooLarge})))
}
