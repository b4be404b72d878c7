package watermillsuite_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/kafka"
)

// Per-key ordering (docs/ordering.md) under Watermill's universal suite:
// the suite's GuaranteedOrder tests (TestPublishSubscribeInOrder, TestNoAck)
// run on a composite whose outbox orders every type by key, relayed by two
// instances, with every message the suite publishes carrying one and the
// same key. Without ordering: key, two relays send one topic's batches in
// parallel and the suite sees them interleaved; with it, the events of the
// key go one at a time across both instances, in publish order.

// suiteKey is the one key of every message of the ordered runs.
const suiteKey = "suite-key"

// orderedOnceboxConfig is suiteOnceboxConfig with ordering: key in the
// defaults block, which every discovered type takes, and batches of 10:
// fewer than the 100 messages of TestPublishSubscribeInOrder's one Publish
// call, so that without the key the two relays would claim parts of that
// call and send them in parallel. They do: with ordering none (and these
// batches) TestPublishSubscribeInOrder fails on both brokers.
func orderedOnceboxConfig() oncebox.Config {
	cfg := suiteOnceboxConfig()
	cfg.Outbox.Defaults.Ordering = oncebox.OrderingKey
	cfg.Outbox.Defaults.BatchSize = 10
	return cfg
}

// startOrdered is startOutbox with ordering: key and one relay instance
// per publisher of relayOuts.
func startOrdered(t *testing.T, relayOuts ...message.Publisher) *outbox {
	t.Helper()
	return startRelays(t, orderedOnceboxConfig(), relayOuts...)
}

// keyedPublisher sets the key of every message it publishes.
type keyedPublisher struct {
	message.Publisher
	key string
}

// oneKey decorates pub: every message it publishes carries suiteKey.
func oneKey(pub message.Publisher) message.Publisher {
	return keyedPublisher{Publisher: pub, key: suiteKey}
}

func (p keyedPublisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		oncebox.SetKey(m, p.key)
	}
	return p.Publisher.Publish(topic, msgs...)
}

// orderedFeatures are features for an ordered run: the same guarantees,
// GuaranteedOrder now held by the key across two relays, at the suite's
// short counts (ForceShort). A single key goes one event per claim, send
// and finalize round trip (docs/ordering.md, "Cost"): the full counts
// (5,000 to 10,000 messages on one topic, hence one key) would take
// minutes, and TestPublishSubscribeInOrder's 1,000 messages would not fit
// its 15-second read.
func orderedFeatures(f tests.Features) tests.Features {
	f.GuaranteedOrder = true
	f.ForceShort = true
	return f
}

// TestWatermillSuiteKafkaOrdered runs the suite on the Kafka composite
// (single-partition topics) with ordering: key, two relays and one key.
func TestWatermillSuiteKafkaOrdered(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	addrs := cluster.ListenAddrs()
	var relayOuts []message.Publisher
	for range 2 {
		relayOut, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs, SaramaConfig: kafka.RecommendedSaramaConfig()}, watermill.NopLogger{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, relayOut.Close()) })
		relayOuts = append(relayOuts, relayOut)
	}
	o := startOrdered(t, relayOuts...)

	newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		return oneKey(o.publisher(nil)), kafkaSubscriber(t, addrs, group)
	}
	tests.TestPubSub(t, orderedFeatures(kafkaFeatures),
		func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, groupFor(t)) },
		newPubSub,
	)
}

// TestWatermillSuiteRabbitMQOrdered runs the suite on the RabbitMQ
// composite (the default exchange, one queue per topic) with ordering: key,
// two relays and one key. The order holds for a single consumer of the
// queue (GuaranteedOrderWithSingleSubscriber, as in the unordered run).
func TestWatermillSuiteRabbitMQOrdered(t *testing.T) {
	runRabbitMQSuite(t, orderedFeatures(rabbitMQFeatures), "", true)
}
