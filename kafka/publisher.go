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
// The Sarama producer is created by the first call that needs it (a
// publish or ProbeBroker), not by NewPublisher, so that a relay starts
// while the cluster is down; a call that cannot create it fails as
// unavailable and the next call tries again.
//
// A Publisher is safe for concurrent use. Close waits for the sends in
// flight, then closes the producer.
type Publisher struct {
	cfg            PublisherConfig
	logger         watermill.LoggerAdapter
	sendTimeout    time.Duration
	connectTimeout time.Duration

	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup // calls and their SendMessages; Close waits for them

	prodMu   sync.Mutex
	producer *producer // nil until a build succeeded
	building *build    // the build in progress, shared by every call that waits for it
	builds   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// producer is a SyncProducer with the client it was built on: Sarama does
// not close a client it was given, so Close closes both.
type producer struct {
	sarama.SyncProducer
	client sarama.Client
}

// build is one attempt to create the producer. done is closed once prod or
// err is set.
type build struct {
	done chan struct{}
	prod *producer
	err  error
}

var (
	_ message.Publisher     = (*Publisher)(nil)
	_ poller.BatchPublisher = (*Publisher)(nil)
	_ poller.BrokerProber   = (*Publisher)(nil)
)

// NewPublisher validates cfg and returns a Publisher for cfg.Brokers. It
// logs, with logger.Info and the prefix "WARNING: ", each warning
// CheckProducerConfig returns for the configuration in use. It fails only
// when the configuration is invalid (oncebox.ErrInvalidConfig): it does not
// contact the cluster, which the first publish or ProbeBroker does. A nil
// logger logs nothing.
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
	return &Publisher{
		cfg:            cfg,
		logger:         logger,
		sendTimeout:    sendTimeout(cfg.SaramaConfig),
		connectTimeout: connectTimeout(cfg.SaramaConfig),
	}, nil
}

// syncProducer returns the producer, creating it when there is none yet.
// Concurrent callers share one build. A caller waits for it at most
// connectTimeout (or until ctx ends): Sarama's constructor has no overall
// deadline (its InitProducerID retries up to Producer.Transaction.Retry.Max
// times), and SendTimeout promises the relay a bound. The build goes on in
// the background; a later call picks up its result. Every failure wraps
// oncebox.ErrBrokerUnavailable: whatever stops the producer from being
// created (no broker, or a broker refusing a producer id) is no message's
// fault, and counting attempts for it would move healthy events to the DLQ.
//
// The caller must be registered with begin, so that Close, which waits for
// the calls before the builds, sees every build started.
func (p *Publisher) syncProducer(ctx context.Context) (*producer, error) {
	p.prodMu.Lock()
	if p.producer != nil {
		defer p.prodMu.Unlock()
		return p.producer, nil
	}
	b := p.building
	if b == nil {
		b = &build{done: make(chan struct{})}
		p.building = b
		p.builds.Add(1)
		go p.build(b)
	}
	p.prodMu.Unlock()

	timer := time.NewTimer(p.connectTimeout)
	defer timer.Stop()
	select {
	case <-b.done:
		return b.prod, b.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: kafka: stopped waiting for the producer to connect: %w", oncebox.ErrBrokerUnavailable, ctx.Err())
	case <-timer.C:
		return nil, fmt.Errorf("%w: kafka: the producer for %s did not connect within %s", oncebox.ErrBrokerUnavailable, strings.Join(p.cfg.Brokers, ","), p.connectTimeout)
	}
}

// build creates the producer for b and publishes the result.
func (p *Publisher) build(b *build) {
	defer p.builds.Done()
	prod, err := newSyncProducer(p.cfg)
	if err != nil {
		b.err = fmt.Errorf("%w: kafka: cannot create the producer for %s: %w", oncebox.ErrBrokerUnavailable, strings.Join(p.cfg.Brokers, ","), err)
		p.logger.Debug("Kafka producer not created", watermill.LogFields{"brokers": p.cfg.Brokers, "err": err})
	} else {
		b.prod = prod
		p.logger.Info("Kafka producer connected", watermill.LogFields{"brokers": p.cfg.Brokers})
	}
	p.prodMu.Lock()
	p.producer = prod
	p.building = nil
	p.prodMu.Unlock()
	close(b.done)
}

// newSyncProducer creates the client, then the producer on it, and turns a
// panic of Sarama's constructors into an error. It does not use
// sarama.NewSyncProducer, which leaks its client (connections and a
// metadata goroutine) when the producer fails after the client connected,
// for example when InitProducerID fails: with lazy creation that would
// happen on every call during such a failure.
func newSyncProducer(cfg PublisherConfig) (prod *producer, err error) {
	var client sarama.Client
	defer func() {
		if r := recover(); r != nil {
			prod, err = nil, fmt.Errorf("sarama panicked: %v", r)
		}
		if err != nil && client != nil {
			_ = client.Close()
		}
	}()
	client, err = sarama.NewClient(cfg.Brokers, cfg.SaramaConfig)
	if err != nil {
		return nil, err
	}
	sp, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return nil, err
	}
	return &producer{SyncProducer: sp, client: client}, nil
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

// send gets the producer and runs SendMessages, abandoning the wait (not
// the send) when ctx ends.
func (p *Publisher) send(ctx context.Context, records []*sarama.ProducerMessage) error {
	if !p.begin() {
		return fmt.Errorf("%w: kafka: %w", oncebox.ErrBrokerUnavailable, oncebox.ErrClosed)
	}
	defer p.inflight.Done()
	prod, err := p.syncProducer(ctx)
	if err != nil {
		return err
	}
	if ctx.Done() == nil {
		return sendMessages(prod, records)
	}
	// This call's own registration keeps the counter above zero, so this
	// Add cannot race with Close's Wait.
	p.inflight.Add(1)
	done := make(chan error, 1)
	go func() {
		defer p.inflight.Done()
		done <- sendMessages(prod, records)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: kafka: stopped waiting for the broker: %w", oncebox.ErrBrokerUnavailable, ctx.Err())
	}
}

// begin registers a call unless the Publisher is closed. Close sets closed
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

func sendMessages(prod *producer, records []*sarama.ProducerMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("oncebox: kafka: SendMessages panicked: %v", r)
		}
	}()
	return prod.SendMessages(records)
}

// ProbeBroker implements poller.BrokerProber: it returns nil when the
// Publisher has a producer or can create one now, and an error wrapping
// oncebox.ErrBrokerUnavailable otherwise (the cluster cannot be reached,
// ctx ended, the Publisher is closed). It sends no message. Once a
// producer exists it answers nil without contacting the cluster: Sarama
// KeepsKeyOrder implements poller.KeyOrderKeeper: with an idempotent
// producer, one request in flight per broker and a partitioner that maps a
// key to a fixed partition (RecommendedPublisherConfig), the events of one
// key in a call go to one partition in the order given, and a batch that
// fails fails the ones after it (their sequence numbers no longer follow),
// so the relay sends several events of a key in one call. With any other
// producer config the relay sends a key's events one call at a time.
func (p *Publisher) KeepsKeyOrder() bool {
	c := p.cfg.SaramaConfig
	if c == nil || !c.Producer.Idempotent || c.Net.MaxOpenRequests != 1 || c.Producer.Partitioner == nil {
		return false
	}
	part := c.Producer.Partitioner("")
	return part != nil && keyedConsistently(part)
}

// reconnects by itself, and the next send tells whether it can.
func (p *Publisher) ProbeBroker(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: kafka: %w", oncebox.ErrBrokerUnavailable, err)
	}
	if !p.begin() {
		return fmt.Errorf("%w: kafka: %w", oncebox.ErrBrokerUnavailable, oncebox.ErrClosed)
	}
	defer p.inflight.Done()
	_, err := p.syncProducer(ctx)
	return err
}

// Close waits for the calls in flight and for a producer being created,
// then closes the producer and its client, if one was created. Later calls
// fail with an error wrapping oncebox.ErrClosed and
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
		// Builds start only inside registered calls, so none starts after
		// this Wait; one a call gave up on is still running and is waited
		// for, so that its producer is closed rather than leaked.
		p.builds.Wait()
		p.prodMu.Lock()
		prod := p.producer
		p.prodMu.Unlock()
		if prod == nil {
			return
		}
		var errs []error
		if err := prod.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the producer: %w", err))
		}
		if err := prod.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
			errs = append(errs, fmt.Errorf("closing the client: %w", err))
		}
		if len(errs) > 0 {
			p.closeErr = fmt.Errorf("oncebox: kafka: %w", errors.Join(errs...))
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
