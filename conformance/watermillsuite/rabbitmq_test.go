package watermillsuite_test

import (
	"os"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// rabbitMQFeatures is what the composite "oncebox publisher → relay →
// RabbitMQ → watermill-amqp subscriber" promises in the layout
// rabbitmq.RecommendedSubscriberConfig describes (the default exchange, one
// durable queue per topic), declared to the suite. Each flag that turns
// suite tests off says why.
var rabbitMQFeatures = tests.Features{
	// Off, so TestConsumerGroups is skipped: in this layout a topic is one
	// queue, and every subscriber of the topic competes for its messages,
	// whatever "group" it names; there is no second copy for a second group.
	// Groups need an exchange that copies each message to a queue per group
	// (watermill-amqp's NewDurablePubSubConfig), which the publisher's
	// Exchange setting reaches but the recommended layout does not use.
	ConsumerGroups: false,
	// At least once: see kafkaFeatures.
	ExactlyOnceDelivery: false,
	// The relay sends one type's events in claim order from one loop, each
	// call waiting for its confirms before the next, so the queue holds them
	// in order; with one consumer they arrive in that order. Ten competing
	// consumers of one queue take turns and interleave, so the order holds
	// with a single subscriber only — what watermill-amqp declares for
	// itself.
	GuaranteedOrder:                     true,
	GuaranteedOrderWithSingleSubscriber: true,
	// Durable queues and persistent messages, behind rows in PostgreSQL.
	Persistent: true,
	// Off: a queue hands each message to one consumer and forgets it once
	// acked, so a new subscriber does not see old messages.
	NewSubscriberReceivesOldMessages: false,
	// Empty, so TestReconnect is skipped: the RabbitMQ of this machine is
	// shared by every test package running at the same time (`make test`),
	// and restarting it would fail theirs. The publisher's reconnection is
	// tested in the rabbitmq package (TestBrokerLostIsUnavailableThenReconnects,
	// through a killable proxy).
	RestartServiceCommand: nil,
	// Full counts unless -short: see kafkaFeatures.
	ForceShort: false,
}

// amqpURL is the RabbitMQ the tests use: $ONCEBOX_TEST_AMQP_URL or the
// machine's.
func amqpURL() string {
	if u := os.Getenv("ONCEBOX_TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// TestWatermillSuiteRabbitMQ runs Watermill's universal Pub/Sub suite on the
// composite "oncebox publisher → relay → RabbitMQ → watermill-amqp
// subscriber" with rabbitmq.RecommendedSubscriberConfig: the default
// exchange, one durable queue per topic.
func TestWatermillSuiteRabbitMQ(t *testing.T) {
	runRabbitMQSuite(t, rabbitMQFeatures, "", false)
}

// rabbitMQExchangeFeatures are rabbitMQFeatures in the layout with an
// exchange, where each consumer group has a queue of its own.
var rabbitMQExchangeFeatures = func() tests.Features {
	f := rabbitMQFeatures
	f.ConsumerGroups = true
	// TestWatermillSuiteRabbitMQ runs every other test at full counts over
	// the same publisher, relay and subscriber; the short counts here keep
	// the package within `make test`'s budget.
	f.ForceShort = true
	return f
}()

// TestWatermillSuiteRabbitMQConsumerGroups runs the suite in the layout that
// gives RabbitMQ consumer groups: the relay publishes to one durable direct
// exchange (rabbitmq.PublisherConfig.Exchange) with the topic as routing key,
// and each group's subscriber binds a queue of its own, <topic>_<group>, to
// the topic's key, so every group gets a copy, as with watermill-amqp's
// NewDurablePubSubConfig. This is where TestConsumerGroups runs.
func TestWatermillSuiteRabbitMQConsumerGroups(t *testing.T) {
	runRabbitMQSuite(t, rabbitMQExchangeFeatures, "oncebox-suite-"+watermill.NewShortUUID(), false)
}

// runRabbitMQSuite runs the suite with the relay publishing to exchange (""
// for the default exchange, where the queue is the topic). Ordered, two
// relays run the outbox with ordering: key and every message published
// carries one key (TestWatermillSuiteRabbitMQOrdered).
func runRabbitMQSuite(t *testing.T, features tests.Features, exchange string, ordered bool) {
	admin, err := amqp.Dial(amqpURL())
	require.NoError(t, err, "this test needs RabbitMQ at %s (make services starts it), or ONCEBOX_TEST_AMQP_URL", amqpURL())
	adminCh, err := admin.Channel()
	require.NoError(t, err)
	// The queues outlive their consumers (durable, not auto-deleted): delete
	// every one the suite declared, and the exchange, once the suite is
	// done. Registered first, so it runs last, after the relay and the
	// subscribers have stopped.
	var queuesMu sync.Mutex
	queues := map[string]bool{}
	t.Cleanup(func() {
		defer func() { _ = admin.Close() }()
		queuesMu.Lock()
		defer queuesMu.Unlock()
		for q := range queues {
			if _, err := adminCh.QueueDelete(q, false, false, false); err != nil {
				t.Errorf("delete queue %s: %v", q, err)
				return
			}
		}
		if exchange != "" {
			if err := adminCh.ExchangeDelete(exchange, false, false); err != nil {
				t.Errorf("delete exchange %s: %v", exchange, err)
			}
		}
	})
	recordQueue := func(name string) {
		queuesMu.Lock()
		queues[name] = true
		queuesMu.Unlock()
	}
	if exchange != "" {
		// Publishing to an exchange that does not exist closes the channel:
		// the exchange is part of the topology a deployment provisions.
		require.NoError(t, adminCh.ExchangeDeclare(exchange, "direct", true, false, false, false, nil))
	}

	newRelayOut := func() *rabbitmq.Publisher {
		relayOut, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: amqpURL(), Exchange: exchange}, watermill.NopLogger{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, relayOut.Close()) })
		return relayOut
	}
	relayOut := newRelayOut()
	var o *outbox
	if ordered {
		o = startOrdered(t, relayOut, newRelayOut())
	} else {
		o = startOutbox(t, relayOut)
	}

	// The rabbitmq publisher declares nothing, and an event sent to a topic
	// with no queue comes back unroutable (retried, then the DLQ). A
	// deployment declares its queues up front; on the default exchange the
	// composite does it before it first writes to a topic, with the queue
	// the subscribers declare. With an exchange, the queues are the groups',
	// and the suite binds each before it publishes.
	var declare func(topic string) error
	if exchange == "" {
		declare = func(topic string) error {
			recordQueue(topic)
			return relayOut.DeclareDurableQueue(topic)
		}
	}
	newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		cfg := rabbitmq.RecommendedSubscriberConfig(amqpURL())
		generate := cfg.Queue.GenerateName
		if exchange != "" {
			cfg.Exchange.GenerateName = amqpwm.GenerateExchangeNameConstant(exchange)
			cfg.Exchange.Type = "direct"
			cfg.Exchange.Durable = true
			cfg.QueueBind.GenerateRoutingKey = func(topic string) string { return topic }
			generate = amqpwm.GenerateQueueNameTopicNameWithSuffix(group)
		}
		cfg.Queue.GenerateName = func(topic string) string {
			name := generate(topic)
			recordQueue(name)
			return name
		}
		require.Empty(t, rabbitmq.CheckSubscriberConfig(cfg))
		sub, err := amqpwm.NewSubscriber(cfg, watermill.NopLogger{})
		require.NoError(t, err)
		closeAtEnd(t, sub)
		if ordered {
			return oneKey(o.publisher(declare)), sub
		}
		return o.publisher(declare), sub
	}
	var groups tests.ConsumerGroupPubSubConstructor
	if features.ConsumerGroups {
		groups = newPubSub
	}
	tests.TestPubSub(t, features,
		// As watermill-amqp's own suite run: the plain constructor is group
		// "test" (queue <topic>_test in the exchange layout).
		func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, "test") },
		groups,
	)
}
