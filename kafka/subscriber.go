package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
)

// maxInstanceID is the longest group instance id Kafka and Sarama accept.
const maxInstanceID = sarama.MAX_GROUP_INSTANCE_ID_LENGTH

// StaticInstanceID is the instance id of the group member that Subscriber
// makes for topic under the static member id (StaticMember): id + "-" +
// topic. Characters outside Kafka's alphabet ([a-zA-Z0-9._-]) become '_';
// an id longer than 249 characters is cut and ends with a hash of the whole
// topic instead, so that long topics keep distinct ids.
func StaticInstanceID(id, topic string) string {
	full := sanitizeInstanceID(id + "-" + topic)
	if len(full) <= maxInstanceID {
		return full
	}
	sum := sha256.Sum256([]byte(topic))
	suffix := "-" + hex.EncodeToString(sum[:8])
	base := sanitizeInstanceID(id)
	if len(base) > maxInstanceID-len(suffix) {
		base = base[:maxInstanceID-len(suffix)]
	}
	return base + suffix
}

func sanitizeInstanceID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// Subscriber is watermill-kafka's subscriber made safe for static
// membership on several topics. watermill-kafka makes one consumer group
// member per subscribed topic, all with the Sarama configuration's
// Consumer.Group.InstanceId: two topics under one instance id make two
// members that fence each other for ever (FENCED_INSTANCE_ID, a rebalance
// and a redelivery each time). Subscriber subscribes each topic through a
// watermill-kafka subscriber of its own whose instance id is
// StaticInstanceID(id, topic). Without an instance id it behaves as
// watermill-kafka's subscriber. It is safe for concurrent use.
type Subscriber struct {
	cfg    kafkawm.SubscriberConfig
	logger watermill.LoggerAdapter

	mu     sync.Mutex
	subs   []*kafkawm.Subscriber // one per Subscribe; guarded by mu
	closed bool                  // guarded by mu
}

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber returns a Subscriber of cfg (RecommendedSubscriberConfig,
// with StaticMember for static membership). It fails where
// watermill-kafka's NewSubscriber fails.
func NewSubscriber(cfg kafkawm.SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	probe, err := kafkawm.NewSubscriber(cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("kafka: subscriber: %w", err)
	}
	_ = probe.Close() // it connected nowhere: NewSubscriber only validates
	return &Subscriber{cfg: cfg, logger: logger}, nil
}

// Subscribe subscribes to topic through a watermill-kafka subscriber of its
// own, under the instance id StaticInstanceID(id, topic) when cfg has one.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	cfg := s.cfg
	if sc := cfg.OverwriteSaramaConfig; sc != nil && sc.Consumer.Group.InstanceId != "" {
		c := *sc
		c.Consumer.Group.InstanceId = StaticInstanceID(sc.Consumer.Group.InstanceId, topic)
		cfg.OverwriteSaramaConfig = &c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("kafka: subscriber: Subscribe after Close")
	}
	sub, err := kafkawm.NewSubscriber(cfg, s.logger)
	if err != nil {
		return nil, fmt.Errorf("kafka: subscriber: topic %q: %w", topic, err)
	}
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("kafka: subscriber: topic %q: %w", topic, err)
	}
	s.subs = append(s.subs, sub)
	return msgs, nil
}

// Close closes every topic's subscriber and returns their errors, joined.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, sub := range s.subs {
		errs = append(errs, sub.Close())
	}
	return errors.Join(errs...)
}
