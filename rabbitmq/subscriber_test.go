package rabbitmq_test

import (
	"strings"
	"testing"

	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

func TestRecommendedSubscriberConfigHasNoWarning(t *testing.T) {
	cfg := rabbitmq.RecommendedSubscriberConfig(brokerURL())
	require.Empty(t, rabbitmq.CheckSubscriberConfig(cfg))
	require.NoError(t, cfg.ValidateSubscriber())
	require.True(t, cfg.Queue.Durable)
	require.False(t, cfg.Consume.NoRequeueOnNack)
	require.Equal(t, rabbitmq.RecommendedPrefetch, cfg.Consume.Qos.PrefetchCount)
	require.Equal(t, "orders", cfg.Queue.GenerateName("orders"))
	require.Equal(t, "", cfg.Exchange.GenerateName("orders"), "the default exchange, as the publisher's default")
}

func TestCheckSubscriberConfigWarns(t *testing.T) {
	mentions := func(t *testing.T, warnings []string, want ...string) {
		t.Helper()
		all := strings.Join(warnings, "\n")
		for _, w := range want {
			require.Contains(t, all, w)
		}
	}

	t.Run("acknowledging a failed message (the auto-ack of watermill-amqp v3)", func(t *testing.T) {
		// v3's subscriber always consumes with autoAck false; what acks
		// regardless of the handler is dropping a nacked message.
		cfg := rabbitmq.RecommendedSubscriberConfig(brokerURL())
		cfg.Consume.NoRequeueOnNack = true
		w := rabbitmq.CheckSubscriberConfig(cfg)
		require.Len(t, w, 1)
		mentions(t, w, "NoRequeueOnNack", "dropped, as if acknowledged on receipt")
	})

	t.Run("non-durable preset", func(t *testing.T) {
		w := rabbitmq.CheckSubscriberConfig(amqpwm.NewNonDurableQueueConfig(brokerURL()))
		mentions(t, w, "Queue.Durable is false", "lost when RabbitMQ restarts")
	})

	t.Run("non-durable pub/sub preset", func(t *testing.T) {
		w := rabbitmq.CheckSubscriberConfig(amqpwm.NewNonDurablePubSubConfig(brokerURL(), amqpwm.GenerateQueueNameTopicNameWithSuffix("svc")))
		mentions(t, w, "Queue.Durable is false", "Exchange.Durable is false")
	})

	t.Run("durable presets of watermill-amqp pass", func(t *testing.T) {
		require.Empty(t, rabbitmq.CheckSubscriberConfig(amqpwm.NewDurableQueueConfig(brokerURL())))
		require.Empty(t, rabbitmq.CheckSubscriberConfig(amqpwm.NewDurablePubSubConfig(brokerURL(), amqpwm.GenerateQueueNameTopicNameWithSuffix("svc"))))
	})

	t.Run("queues that drop or vanish", func(t *testing.T) {
		cfg := rabbitmq.RecommendedSubscriberConfig(brokerURL())
		cfg.Queue.AutoDelete = true
		cfg.Queue.Exclusive = true
		cfg.Queue.Arguments = map[string]any{
			"x-message-ttl": 60000, "x-expires": 3600000, "x-max-length": 1000,
			"x-delivery-limit": 5, "x-dead-letter-exchange": "dlx",
		}
		cfg.Consume.NoRequeueOnNack = true
		cfg.Consume.NoWait = true
		cfg.Consume.Qos.PrefetchCount = 0
		w := rabbitmq.CheckSubscriberConfig(cfg)
		require.Len(t, w, 9, "%q", w)
		mentions(t, w, "AutoDelete", "Exclusive", "x-message-ttl", "x-expires", "x-max-length", "x-delivery-limit",
			"dead-lettered instead of redelivered", "Consume.NoWait", "PrefetchCount is 0")
	})

	t.Run("reject-publish overflow is fine", func(t *testing.T) {
		cfg := rabbitmq.RecommendedSubscriberConfig(brokerURL())
		cfg.Queue.Arguments = map[string]any{"x-max-length": 1000, "x-overflow": "reject-publish"}
		require.Empty(t, rabbitmq.CheckSubscriberConfig(cfg))
	})

	t.Run("unusable", func(t *testing.T) {
		w := rabbitmq.CheckSubscriberConfig(amqpwm.Config{})
		mentions(t, w, "AmqpURI is empty", "Marshaler is nil", "TopologyBuilder is nil", "Queue.GenerateName is nil")
	})
}
