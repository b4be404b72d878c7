package watermillsuite_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// kafkaFeatures is what the composite "oncebox publisher → relay → Kafka →
// watermill-kafka subscriber" promises, declared to the suite. Each flag
// that turns suite tests off says why.
var kafkaFeatures = tests.Features{
	ConsumerGroups: true,
	// At least once, not exactly once: a relay that crashes after the broker
	// confirmed a batch but before it marked the rows PROCESSED sends them
	// again after max-batch-processing-time; consumers drop the duplicates
	// with the inbox. Watermill's Kafka declares the same. The suite then
	// reads with de-duplication, and runs TestContinueAfterSubscribeClose and
	// TestConcurrentClose, which it skips for exactly-once Pub/Subs.
	ExactlyOnceDelivery: false,
	// The relay claims one type's events in (next_retry_at, id) order, so a
	// Publish call's messages keep their order, and sends them from one loop
	// per type; each topic has one partition (the cluster's default and
	// the subscriber's InitializeTopicDetails), so Kafka keeps that order for
	// the one consumer of a group that owns it, so
	// TestPublishSubscribeInOrder reads with 10 subscribers in one group
	// (GuaranteedOrderWithSingleSubscriber stays false).
	GuaranteedOrder: true,
	// Events survive the Publisher and Subscriber that carried them: they
	// are rows in PostgreSQL, then records in Kafka.
	Persistent: true,
	// Off: every subscriber here is in a consumer group, and a new member
	// of a group starts at the group's committed offset, not at the
	// beginning of the topic. Watermill's Kafka sets it only for its
	// group-less subscriber; nothing about the outbox changes that.
	NewSubscriberReceivesOldMessages: false,
	// Empty, so TestReconnect is skipped: the broker is kfake, in this
	// process, with no service a command could restart. The relay's side
	// of an outage is tested in the kafka package
	// (TestRelayThroughThePollerToKafka, TestPublisherRecoversWhenTheClusterReturns)
	// and the conformance suite (TestBrokerOutageBurnsNoAttempts).
	RestartServiceCommand: nil,
	// Full message counts (5,000 to 10,000 in the largest tests, 50
	// subscribers in one group) unless `go test -short`, which the suite
	// honours on its own: the Kafka run takes about 30s with them under
	// -race on a 2-core machine.
	ForceShort: false,
}

// TestWatermillSuiteKafka runs Watermill's universal Pub/Sub suite on the
// composite "oncebox publisher → relay → in-process Kafka (kfake) →
// watermill-kafka subscriber" with the configurations the kafka package
// recommends.
func TestWatermillSuiteKafka(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		// The relay may reach a topic before the suite's
		// SubscribeInitialize creates it; either way it has one partition.
		kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	addrs := cluster.ListenAddrs()

	relayOut, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs, SaramaConfig: kafka.RecommendedSaramaConfig()}, watermill.NopLogger{})
	require.NoError(t, err)
	// Cleanups run last-in first-out: the relay (registered by startOutbox
	// below) stops before its publisher closes, and the cluster after both.
	t.Cleanup(func() { require.NoError(t, relayOut.Close()) })
	o := startOutbox(t, relayOut)

	newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		return o.publisher(nil), kafkaSubscriber(t, addrs, group)
	}
	tests.TestPubSub(t, kafkaFeatures,
		func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, groupFor(t)) },
		newPubSub,
	)
}

// kafkaSubscriber is the watermill-kafka subscriber of the suite's
// constructors, in group, closed when t ends.
func kafkaSubscriber(t *testing.T, addrs []string, group string) message.Subscriber {
	cfg := kafka.RecommendedSubscriberConfig(addrs, group)
	// The suite calls SubscribeInitialize before it publishes to a topic.
	cfg.InitializeTopicDetails = &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}
	// As in watermill-kafka's own suite run: members joining and leaving
	// a group all the time rebalance it in seconds, not Sarama's 60s.
	cfg.OverwriteSaramaConfig.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.OverwriteSaramaConfig.Consumer.Group.Rebalance.Timeout = 3 * time.Second
	// watermill-kafka waits NackResendSleep (100ms) before it redelivers
	// a nacked message; TestContinueAfterErrors nacks 300 of them one
	// after the other. The wait is the subscriber's, not the outbox's.
	cfg.NackResendSleep = 10 * time.Millisecond
	sub, err := kafkawm.NewSubscriber(cfg, watermill.NopLogger{})
	require.NoError(t, err)
	closeAtEnd(t, sub)
	return sub
}
