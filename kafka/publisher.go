package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eapache/go-resiliency/breaker"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// UUIDHeader is the Kafka record header that carries the Watermill message
// UUID. It is watermill-kafka's (kafkawm.UUIDHeaderKey), so that its
// subscriber restores the UUID; a message may not use it as a metadata key.
const UUIDHeader = kafkawm.UUIDHeaderKey

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Brokers lists the bootstrap brokers, "host:port". Required.
	Brokers []string
	// SaramaConfig is the producer configuration. Default:
	// RecommendedSaramaConfig(). The Publisher uses it as given, never
	// modifies it, and logs a warning for each weakness CheckProducerConfig
	// finds in it. Producer.Return.Successes and Producer.Return.Errors must
	// be true (Sarama's SyncProducer requires them) and
	// Producer.Transaction.ID empty.
	SaramaConfig *sarama.Config
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.SaramaConfig == nil {
		c.SaramaConfig = RecommendedSaramaConfig()
	}
	return c
}

// Validate reports what makes c unusable, wrapping
// oncebox.ErrInvalidConfig. A nil SaramaConfig is valid: NewPublisher uses
// RecommendedSaramaConfig().
func (c PublisherConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: PublisherConfig.Brokers is empty"))
	}
	if slices.Contains(c.Brokers, "") {
		errs = append(errs, errors.New("kafka: PublisherConfig.Brokers holds an empty address"))
	}
	if c.SaramaConfig != nil {
		if err := c.SaramaConfig.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("kafka: PublisherConfig.SaramaConfig: %w", err))
		}
		if !c.SaramaConfig.Producer.Return.Successes || !c.SaramaConfig.Producer.Return.Errors {
			errs = append(errs, errors.New("kafka: PublisherConfig.SaramaConfig: Producer.Return.Successes and Producer.Return.Errors must be true"))
		}
		if c.SaramaConfig.Producer.Transaction.ID != "" {
			errs = append(errs, errors.New("kafka: PublisherConfig.SaramaConfig: Producer.Transaction.ID must be empty: the Publisher does not run Kafka transactions"))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", oncebox.ErrInvalidConfig, errors.Join(errs...))
}

// Publisher publishes Watermill messages to Kafka through Sarama's
// SyncProducer. It is a message.Publisher and a poller.BatchPublisher: the
// relay hands it a batch and learns the fate of each message from one
// SendMessages round trip.
//
// Each message becomes one Kafka record: the payload is the value; the
// oncebox_key metadata entry, when present, is the record key (so one key's
// events go to one partition, in order); every metadata entry is a record
// header, and the message UUID is the header _watermill_message_uuid, which
// watermill-kafka's subscriber turns back into the UUID.
//
// A Publisher is safe for concurrent use. Close waits for the sends in
// flight, then closes the producer.
type Publisher struct {
	producer    sarama.SyncProducer
	logger      watermill.LoggerAdapter
	sendTimeout time.Duration

	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup // SendMessages calls; Close waits for them

	closeOnce sync.Once
	closeErr  error
}

var (
	_ message.Publisher     = (*Publisher)(nil)
	_ poller.BatchPublisher = (*Publisher)(nil)
)

// NewPublisher connects a Publisher to cfg.Brokers. It logs, with
// logger.Info and the prefix "WARNING: ", each warning CheckProducerConfig
// returns for the configuration in use. It fails when the configuration is
// invalid or no broker can be reached. A nil logger logs nothing.
func NewPublisher(cfg PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, w := range CheckProducerConfig(cfg.SaramaConfig) {
		logger.Info("WARNING: "+w, watermill.LogFields{"component": "oncebox-kafka-publisher"})
	}
	producer, err := newSyncProducer(cfg)
	if err != nil {
		if IsUnavailable(err) {
			err = fmt.Errorf("%w: %w", oncebox.ErrBrokerUnavailable, err)
		}
		return nil, fmt.Errorf("oncebox: kafka: cannot create the producer for %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	return &Publisher{producer: producer, logger: logger, sendTimeout: sendTimeout(cfg.SaramaConfig)}, nil
}

// newSyncProducer turns a panic of Sarama's constructor into an error.
func newSyncProducer(cfg PublisherConfig) (producer sarama.SyncProducer, err error) {
	defer func() {
		if r := recover(); r != nil {
			producer, err = nil, fmt.Errorf("sarama panicked: %v", r)
		}
	}()
	return sarama.NewSyncProducer(cfg.Brokers, cfg.SaramaConfig)
}

// Publish sends msgs to topic in one round trip (see PublishBatch) and
// returns an error if any of them was not confirmed. The error wraps
// oncebox.ErrBrokerUnavailable when the cluster could not be reached.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	results, err := p.PublishBatch(topic, msgs...)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range results {
		if e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("oncebox: kafka: %d of %d messages to %q not published: %w", len(errs), len(msgs), topic, errors.Join(errs...))
	}
	return nil
}

// PublishBatch sends msgs to topic with one SyncProducer.SendMessages call
// and returns one error per message, in order: nil once the broker
// confirmed it (with the configured acks), the reason otherwise.
//
// The second result is the fate of the whole call and wraps
// oncebox.ErrBrokerUnavailable when the cluster could not take the batch:
// when any message failed for a reason IsUnavailable recognises (no broker
// reachable, timeouts, no leader, not enough replicas), when the Publisher
// is closed, or when the context of the first message ended first (the
// send goes on in the background and Close waits for it). The relay then releases the
// batch without counting an attempt; messages already confirmed are sent
// again later (at-least-once). Even then the first result is filled: nil
// for each message known to be confirmed, and each per-message error that
// IsUnavailable recognises wraps oncebox.ErrBrokerUnavailable.
//
// A message the broker or Sarama rejects for itself (larger than
// Producer.MaxMessageBytes or the topic's max.message.bytes, an unknown
// topic when auto-creation is off, a nil message, metadata using
// _watermill_message_uuid) fails alone, in the first result. An empty topic
// fails the whole call with oncebox.ErrInvalidInput. No panic escapes.
func (p *Publisher) PublishBatch(topic string, msgs ...*message.Message) (results []error, callErr error) {
	defer func() {
		if r := recover(); r != nil {
			results, callErr = nil, fmt.Errorf("oncebox: kafka: publish to %q panicked: %v", topic, r)
		}
	}()
	if topic == "" {
		return nil, fmt.Errorf("%w: kafka: empty topic", oncebox.ErrInvalidInput)
	}
	results = make([]error, len(msgs))
	sent := make([]bool, len(msgs)) // marshalled and handed to Sarama
	records := make([]*sarama.ProducerMessage, 0, len(msgs))
	ctx := context.Background()
	for i, msg := range msgs {
		rec, err := marshal(topic, msg)
		if err != nil {
			results[i] = err
			continue
		}
		if len(records) == 0 {
			ctx = msg.Context()
		}
		rec.Metadata = i // comes back with the record's error
		sent[i] = true
		records = append(records, rec)
	}
	if len(records) == 0 {
		return results, nil
	}
	p.logger.Trace("Sending batch to Kafka", watermill.LogFields{"topic": topic, "messages": len(records)})

	sendErr := p.send(ctx, records)
	var perr sarama.ProducerErrors
	switch {
	case sendErr == nil:
	case errors.As(sendErr, &perr):
		for _, pe := range perr {
			i, ok := pe.Msg.Metadata.(int)
			if !ok || i < 0 || i >= len(msgs) {
				return nil, fmt.Errorf("oncebox: kafka: Sarama returned an error for a record it was not given: %w", pe.Err)
			}
			results[i] = fmt.Errorf("oncebox: kafka: message %s to %q: %w", msgs[i].UUID, topic, pe.Err)
		}
	default: // the whole send failed (closed, abandoned, panicked)
		for _, rec := range records {
			i := rec.Metadata.(int)
			results[i] = fmt.Errorf("oncebox: kafka: message %s to %q: %w", msgs[i].UUID, topic, sendErr)
		}
	}

	// The call is unavailable when any message failed for want of the
	// cluster. Sarama's circuit breaker refuses the rest of a topic's
	// messages for 10s after three failed partition look-ups; those messages
	// were not attempted and share the cause of the failures before them: a
	// rejection when some message of this call was rejected (an unknown
	// topic), unavailability otherwise (the breaker opened in an earlier
	// call, or because of an outage).
	var first error
	unavailable, breakerOpen, rejected := 0, 0, 0
	for i, err := range results {
		switch {
		case err == nil || !sent[i]:
		case errors.Is(err, breaker.ErrBreakerOpen):
			breakerOpen++
		case IsUnavailable(err):
			unavailable++
			if first == nil {
				first = err
			}
		default:
			rejected++
		}
	}
	if unavailable > 0 || (breakerOpen > 0 && rejected == 0) {
		n := 0
		for i, err := range results {
			if err == nil || !sent[i] || !IsUnavailable(err) {
				continue
			}
			n++
			if first == nil {
				first = err
			}
			if !errors.Is(err, oncebox.ErrBrokerUnavailable) {
				results[i] = fmt.Errorf("%w: %w", oncebox.ErrBrokerUnavailable, err)
			}
		}
		p.logger.Debug("Kafka unavailable", watermill.LogFields{"topic": topic, "messages": len(msgs), "not_delivered": n, "err": first})
		return results, fmt.Errorf("%w: kafka: %d of %d messages to %q not delivered: %w", oncebox.ErrBrokerUnavailable, n, len(msgs), topic, first)
	}
	if sendErr != nil {
		p.logger.Debug("Kafka rejected messages", watermill.LogFields{"topic": topic, "messages": len(msgs), "err": sendErr})
	}
	return results, nil
}

// send runs SendMessages, abandoning the wait (not the send) when ctx ends.
func (p *Publisher) send(ctx context.Context, records []*sarama.ProducerMessage) error {
	if !p.begin() {
		return fmt.Errorf("%w: kafka: %w", oncebox.ErrBrokerUnavailable, oncebox.ErrClosed)
	}
	if ctx.Done() == nil {
		defer p.inflight.Done()
		return p.sendMessages(records)
	}
	done := make(chan error, 1)
	go func() {
		defer p.inflight.Done()
		done <- p.sendMessages(records)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: kafka: stopped waiting for the broker: %w", oncebox.ErrBrokerUnavailable, ctx.Err())
	}
}

// begin registers a send unless the Publisher is closed. Close sets closed
// under the write lock before it waits, so every Add happens before Wait.
func (p *Publisher) begin() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return false
	}
	p.inflight.Add(1)
	return true
}

func (p *Publisher) sendMessages(records []*sarama.ProducerMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("oncebox: kafka: SendMessages panicked: %v", r)
		}
	}()
	return p.producer.SendMessages(records)
}

// Close waits for the sends in flight, then closes the producer. Later
// publishes fail with an error wrapping oncebox.ErrClosed and
// oncebox.ErrBrokerUnavailable. Close may be called more than once and
// from any goroutine; it returns the first call's result.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		// Sarama closes its input channel on Close: a SendMessages still
		// feeding it would panic in a goroutine of Sarama's, out of reach.
		p.inflight.Wait()
		if err := p.producer.Close(); err != nil {
			p.closeErr = fmt.Errorf("oncebox: kafka: closing the producer: %w", err)
		}
	})
	return p.closeErr
}

// marshal builds the Kafka record of msg.
func marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	if msg == nil {
		return nil, fmt.Errorf("%w: kafka: nil message", oncebox.ErrInvalidInput)
	}
	if _, ok := msg.Metadata[UUIDHeader]; ok {
		return nil, fmt.Errorf("%w: kafka: message %s: metadata key %s is reserved for the message UUID", oncebox.ErrInvalidInput, msg.UUID, UUIDHeader)
	}
	headers := make([]sarama.RecordHeader, 0, len(msg.Metadata)+1)
	headers = append(headers, sarama.RecordHeader{Key: []byte(UUIDHeader), Value: []byte(msg.UUID)})
	// Sorted, so that the records of one message are byte-identical.
	for _, k := range slices.Sorted(maps.Keys(msg.Metadata)) {
		headers = append(headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(msg.Metadata[k])})
	}
	payload := msg.Payload
	if payload == nil {
		payload = []byte{} // an empty value, never a null one (a tombstone on a compacted topic)
	}
	rec := &sarama.ProducerMessage{
		Topic:   topic,
		Value:   sarama.ByteEncoder(payload),
		Headers: headers,
	}
	if key := msg.Metadata.Get(oncebox.HeaderKey); key != "" {
		rec.Key = sarama.StringEncoder(key)
	}
	return rec, nil
}
