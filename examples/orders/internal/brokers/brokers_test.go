package brokers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateNamesTheSetting(t *testing.T) {
	require.ErrorContains(t, Config{Kind: "nats"}.Validate(), "-broker")
	require.ErrorContains(t, Config{Kind: Kafka}.Validate(), "-kafka-brokers")
	require.ErrorContains(t, Config{Kind: RabbitMQ}.Validate(), "-amqp-url")
	require.ErrorContains(t, Config{Kind: RabbitMQ, AMQPURL: "http://x"}.Validate(), "-amqp-url")
	require.NoError(t, Config{Kind: Kafka, KafkaBrokers: []string{"127.0.0.1:9092"}}.Validate())
	require.NoError(t, Config{Kind: RabbitMQ, AMQPURL: "amqp://guest:guest@127.0.0.1:5672/"}.Validate())
}

func TestKafkaTopicsAreCreatedAndDeleted(t *testing.T) {
	c, err := StartKafka(1, "seeded")
	require.NoError(t, err)
	defer c.Close()
	addrs := c.ListenAddrs()
	require.NoError(t, EnsureKafkaTopic(addrs, "made", 3))
	require.NoError(t, EnsureKafkaTopic(addrs, "made", 3), "an existing topic is fine")
	require.NoError(t, DeleteKafkaTopic(addrs, "made"))
	require.NoError(t, DeleteKafkaTopic(addrs, "made"), "a missing topic is fine")
}

func TestRedactHidesThePassword(t *testing.T) {
	require.NotContains(t, redact("amqp://guest:secret@host:5672/"), "secret")
}
