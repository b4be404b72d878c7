// Package brokers builds the broker side of the orders example from its
// configuration: the relay's publisher (oncebox's kafka or rabbitmq
// adapter) and the consumer's Watermill subscriber, with the settings the
// adapters recommend. Nothing else in the example knows which broker it
// runs on.
package brokers

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// The brokers the example runs on.
const (
	Kafka    = "kafka"
	RabbitMQ = "rabbitmq"
)

// Config says which broker to use and how to reach it.
type Config struct {
	// Kind is Kafka or RabbitMQ.
	Kind string
	// KafkaBrokers are the bootstrap brokers, host:port (Kind Kafka).
	KafkaBrokers []string
	// AMQPURL is amqp://user:password@host:5672/vhost (Kind RabbitMQ).
	AMQPURL string
}

// Validate reports a missing or unknown setting, naming the flag and the
// environment variable that set it.
func (c Config) Validate() error {
	switch c.Kind {
	case Kafka:
		if len(c.KafkaBrokers) == 0 {
			return errors.New("broker kafka: no brokers: set -kafka-brokers or $KAFKA_BROKERS (host:port,…)")
		}
	case RabbitMQ:
		if c.AMQPURL == "" {
			return errors.New("broker rabbitmq: no URL: set -amqp-url or $AMQP_URL")
		}
		if _, err := amqp.ParseURI(c.AMQPURL); err != nil {
			return fmt.Errorf("broker rabbitmq: -amqp-url / $AMQP_URL: %w", err)
		}
	default:
		return fmt.Errorf("broker %q: want %q or %q (-broker, $BROKER)", c.Kind, Kafka, RabbitMQ)
	}
	return nil
}

// NewPublisher returns the relay's publisher. On RabbitMQ it also declares
// a durable queue for each of topics (the publisher sends to the default
// exchange with the topic as routing key, so the queue must exist before the
// first event is relayed, or the broker returns it as unroutable). On Kafka
// the topics must exist or the cluster must create them on first use.
func NewPublisher(c Config, topics []string, logger watermill.LoggerAdapter) (message.Publisher, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.Kind {
	case Kafka:
		// oncebox.yaml sets max-batch-processing-time to 60s, and the relay
		// refuses a publisher that could still be waiting for the cluster
		// then: 5s of metadata + 6 attempts × 8s = 53s.
		sc := kafka.RecommendedSaramaConfig()
		sc.Producer.Timeout = 5 * time.Second
		sc.Net.ReadTimeout = 8 * time.Second
		sc.Metadata.Timeout = 5 * time.Second
		return kafka.NewPublisher(kafka.PublisherConfig{Brokers: c.KafkaBrokers, SaramaConfig: sc}, logger)
	default:
		pub, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: c.AMQPURL, ConnectionName: "orders-relay"}, logger)
		if err != nil {
			return nil, fmt.Errorf("%w (is RabbitMQ running? `rabbitmq-server -detached` starts the local one)", err)
		}
		for _, t := range topics {
			if err := pub.DeclareDurableQueue(t); err != nil {
				_ = pub.Close()
				return nil, err
			}
		}
		return pub, nil
	}
}

// NewSubscriber returns the consumer's subscriber: watermill-kafka's with
// the consumer group (offsets committed only past acked messages), or
// watermill-amqp's on a durable queue named after the topic (declared on
// Subscribe). Both acknowledge only after the handler returned, which the
// inbox needs. Each warning the adapters' checks find is logged.
func NewSubscriber(c Config, consumerGroup string, logger watermill.LoggerAdapter) (message.Subscriber, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	switch c.Kind {
	case Kafka:
		if consumerGroup == "" {
			return nil, errors.New("broker kafka: the consumer group is empty (-consumer-group, $CONSUMER_GROUP)")
		}
		cfg := kafka.RecommendedSubscriberConfig(c.KafkaBrokers, consumerGroup)
		for _, w := range kafka.CheckSubscriberConfig(cfg) {
			logger.Info("WARNING: "+w, nil)
		}
		sub, err := kafkawm.NewSubscriber(cfg, logger)
		if err != nil {
			return nil, fmt.Errorf("kafka subscriber on %v: %w", c.KafkaBrokers, err)
		}
		return sub, nil
	default:
		cfg := rabbitmq.RecommendedSubscriberConfig(c.AMQPURL)
		for _, w := range rabbitmq.CheckSubscriberConfig(cfg) {
			logger.Info("WARNING: "+w, nil)
		}
		sub, err := amqpwm.NewSubscriber(cfg, logger)
		if err != nil {
			return nil, fmt.Errorf("rabbitmq subscriber: %w (is RabbitMQ running? `rabbitmq-server -detached` starts the local one)", err)
		}
		return sub, nil
	}
}

// StartKafka starts an in-process Kafka cluster (kfake: the real wire
// protocol, in memory) on 127.0.0.1 with topics created, each with
// partitions partitions. Close it after the services that use it.
func StartKafka(partitions int32, topics ...string) (*kfake.Cluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		return nil, fmt.Errorf("in-process Kafka: %w", err)
	}
	return c, nil
}

// PingRabbitMQ connects to url and disconnects, to tell "RabbitMQ is down"
// apart from any later error.
func PingRabbitMQ(amqpURL string) error {
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return fmt.Errorf("RabbitMQ at %s: %w (start it with `rabbitmq-server -detached`, or point -amqp-url / $AMQP_URL at one)", redact(amqpURL), err)
	}
	return conn.Close()
}

// DeleteQueue deletes the RabbitMQ queue name (and the messages in it).
// Deleting a queue that does not exist succeeds.
func DeleteQueue(amqpURL, name string) error {
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return fmt.Errorf("delete queue %s: %w", name, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("delete queue %s: %w", name, err)
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(name, false, false, false); err != nil {
		return fmt.Errorf("delete queue %s: %w", name, err)
	}
	return nil
}

// redact hides the password of an AMQP URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// EnsureKafkaTopic creates topic on the cluster at addrs with partitions
// partitions (replication factor 1: a development cluster) unless it exists.
func EnsureKafkaTopic(addrs []string, topic string, partitions int32) error {
	admin, err := kafkaAdmin(addrs)
	if err != nil {
		return err
	}
	defer admin.Close()
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("create Kafka topic %s: %w", topic, err)
	}
	return nil
}

// DeleteKafkaTopic deletes topic from the cluster at addrs. Deleting a topic
// that does not exist succeeds.
func DeleteKafkaTopic(addrs []string, topic string) error {
	admin, err := kafkaAdmin(addrs)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.DeleteTopic(topic); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("delete Kafka topic %s: %w", topic, err)
	}
	return nil
}

func kafkaAdmin(addrs []string) (sarama.ClusterAdmin, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "orders-example-admin"
	cfg.Version = sarama.V2_3_0_0
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Admin.Timeout = 10 * time.Second
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		return nil, fmt.Errorf("Kafka at %v: %w", addrs, err)
	}
	return admin, nil
}
