package kafka

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
)

// RecommendedSaramaConfig returns the producer configuration the relay
// should use. Each setting, and why:
//
//   - Producer.RequiredAcks = WaitForAll (acks=all): a message is confirmed
//     only once every in-sync replica has it, so a confirmed event survives
//     the loss of the partition leader. The outbox marks an event PROCESSED
//     on that confirmation, so anything weaker can lose a PROCESSED event.
//     Pair it with the topic's min.insync.replicas ≥ 2 (a broker setting the
//     client cannot see): with min.insync.replicas = 1, acks=all degrades
//     to acks=1 as soon as the followers fall out of the in-sync set.
//   - Producer.Idempotent = true, with Net.MaxOpenRequests = 1 (Sarama
//     requires exactly 1 for idempotence): the broker drops a retried batch
//     it already wrote (no duplicate from a lost response) and refuses one out
//     of sequence (no reordering of one key's events across retries).
//   - Producer.Retry.Max = 5 with no backoff between retries
//     (Retry.Backoff = 0): a connection reset or a leader change is retried
//     at once against the leader that a fresh metadata look-up names (Sarama
//     waits for a leaderless partition there, Metadata.Retry: 3 × 250ms);
//     idempotence makes retries neither duplicate nor reorder. A backoff
//     would cost much more than it says: when the leader cannot be found,
//     Sarama fails each queued message of the partition and sleeps the
//     backoff after each one, so a batch of 1,000 with a 100ms backoff takes
//     100s to fail during an outage; without it, about three metadata
//     look-ups (then Sarama's circuit breaker) whatever the batch size. The
//     relay is the outer retry loop: an outage releases the batch without
//     counting an attempt and the event type backs off.
//   - Producer.Return.Successes and Return.Errors = true: the SyncProducer
//     needs both to report each message's fate.
//   - Producer.Timeout = 10s: how long the leader waits for the replicas'
//     acknowledgement before answering RequestTimedOut (retried).
//   - Net.DialTimeout = 5s (Sarama: 30s), Metadata.Timeout = 10s (Sarama:
//     unbounded): an unreachable cluster fails a send in seconds when
//     connections are refused, and within about a minute when packets
//     vanish, well inside the relay's max-batch-processing-time (300s), so
//     an outage releases the batch instead of leaving it to the recovery.
//     Net.ReadTimeout stays 30s, above Producer.Timeout.
//   - Version = sarama.V2_8_0_0: Sarama picks request versions from it, so
//     it must not be newer than the oldest broker. Headers and idempotence
//     need 0.11; from 2.5 (KIP-360) an idempotent producer survives an
//     expired producer id; 2.8 is the oldest release still common, and
//     Sarama's producer at 2.8 (Produce v7, Metadata v9, InitProducerID v2)
//     works against kfake; those versions are above the baseline Kafka 4
//     kept (KIP-896). Raise it when every broker is newer.
//   - Producer.Partitioner = NewHashPartitioner (Sarama's default): a key
//     always maps to the same partition (FNV-1a, not the Java client's
//     murmur2), so one key's events stay in order.
//   - ClientID = "oncebox-relay", to find the relay in broker logs and quotas.
//
// Compression is left off; turning it on changes nothing above.
func RecommendedSaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "oncebox-relay"
	cfg.Version = sarama.V2_8_0_0

	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Retry.Backoff = 0

	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Timeout = 10 * time.Second
	cfg.Metadata.Retry.Max = 3
	cfg.Metadata.Retry.Backoff = 250 * time.Millisecond
	return cfg
}

// CheckProducerConfig returns a human-readable warning for each setting of
// cfg that can lose, duplicate-and-reorder or silently mis-route relayed
// events, or that makes the Publisher fail. It returns nothing for
// RecommendedSaramaConfig(). NewPublisher logs each warning at start. A nil
// cfg is checked as sarama.NewConfig(). docs/kafka.md explains each warning.
func CheckProducerConfig(cfg *sarama.Config) []string {
	var w []string
	if cfg == nil {
		w = append(w, "the Sarama config is nil: Sarama's defaults apply (acks=1, no idempotence)")
		cfg = sarama.NewConfig()
	}
	p := &cfg.Producer
	switch p.RequiredAcks {
	case sarama.WaitForAll:
	case sarama.NoResponse:
		w = append(w, "Producer.RequiredAcks is NoResponse (acks=0): the broker never confirms, so an event is marked PROCESSED whether or not it was written; set sarama.WaitForAll")
	default:
		w = append(w, fmt.Sprintf("Producer.RequiredAcks is %d, not WaitForAll (acks=all): an event confirmed by the leader alone is lost if the leader fails before a follower copied it; set sarama.WaitForAll", p.RequiredAcks))
	}
	if !p.Idempotent {
		w = append(w, "Producer.Idempotent is false: a retry after a lost response writes an event twice, and a retried batch can land after a later one (events of one key out of order); set Producer.Idempotent = true and Net.MaxOpenRequests = 1")
		if cfg.Net.MaxOpenRequests > 1 && p.Retry.Max > 0 {
			w = append(w, fmt.Sprintf("Net.MaxOpenRequests is %d with retries and without idempotence: a failed request retried after the next one reorders events of one key; set Producer.Idempotent = true and Net.MaxOpenRequests = 1", cfg.Net.MaxOpenRequests))
		}
	}
	if p.Retry.Max <= 0 {
		w = append(w, "Producer.Retry.Max is 0: a leader election fails the messages in flight instead of being ridden out, and each failure counts an attempt toward the dead letter queue; set it to 5 or so")
	}
	if !p.Return.Successes || !p.Return.Errors {
		w = append(w, "Producer.Return.Successes and Producer.Return.Errors must both be true: the SyncProducer refuses to start otherwise")
	}
	if !cfg.Version.IsAtLeast(sarama.V0_11_0_0) {
		w = append(w, fmt.Sprintf("Version is %s, older than 0.11: Kafka cannot carry record headers (oncebox_event_id would be lost and every consumer's inbox would refuse the events) nor an idempotent producer; set Version to the oldest broker's version, at least sarama.V0_11_0_0", cfg.Version))
	}
	if p.Partitioner != nil {
		if part := p.Partitioner(""); part != nil && !keyedConsistently(part) {
			w = append(w, "Producer.Partitioner does not map a key to a fixed partition (RequiresConsistency is false): events of one key spread over partitions and lose their order; use sarama.NewHashPartitioner")
		}
	}
	if p.Transaction.ID != "" {
		w = append(w, "Producer.Transaction.ID is set: the Publisher does not run Kafka transactions and a transactional producer refuses sends outside one; leave it empty")
	}
	return w
}

// keyedConsistently reports whether part sends every message with a key to
// a partition chosen by the key alone.
func keyedConsistently(part sarama.Partitioner) bool {
	if d, ok := part.(sarama.DynamicConsistencyPartitioner); ok {
		return d.MessageRequiresConsistency(&sarama.ProducerMessage{Key: sarama.StringEncoder("k")})
	}
	return part.RequiresConsistency()
}

// RecommendedSubscriberConfig returns a watermill-kafka subscriber
// configuration for a service that consumes relayed events through the
// inbox: consumerGroup's offsets advance only past messages whose handler
// returned and acked.
//
//   - ConsumerGroup is required for that: without one watermill-kafka commits
//     nothing and starts at Consumer.Offsets.Initial on every start.
//   - Consumer.Offsets.Initial = OffsetOldest: a group with no committed
//     offset (a new service, a renamed group) starts at the beginning of the
//     topic instead of skipping every event already in it.
//   - Consumer.Offsets.AutoCommit.Enable = true, every second (Sarama's
//     default). This is safe, unlike the Java client's enable.auto.commit,
//     which commits whatever poll() returned: Sarama's auto-commit commits
//     only offsets that were marked, and watermill-kafka v3.1.2 marks a
//     message (sess.MarkMessage) only when it is acked, which the router
//     does after the handler returned (and the inbox committed). So no
//     offset passes a message whose handler has not returned
//     (TestAutoCommitNeverCommitsAnUnackedMessage checks it). The one-second
//     window costs duplicates only: after a crash, the messages acked in the
//     last second are delivered again and the inbox drops them; a rebalance
//     or Close flushes the marks first. AutoCommit.Enable = false is just as
//     safe (watermill-kafka then commits synchronously on each ack) but
//     slow: Sarama sends the commit on the connection that carries the
//     consumer's long-polling fetches when the coordinator leads the
//     partition, and once the consumer has caught up each commit waits
//     behind a fetch that waits for new data (Consumer.MaxWaitTime, 500ms).
//     Against kfake BenchmarkConsume reads 3 to 100 messages/s that way,
//     and over 100,000 with auto-commit.
//   - Version = sarama.V2_3_0_0: record headers (oncebox_event_id) are
//     decoded only from 0.11 on, and 2.3 brings static membership
//     (Consumer.Group.InstanceId). It is the newest level at which Sarama
//     1.43.3's consumer groups work against kfake: from 2.4 Sarama sends
//     OffsetFetch v6, and kfake answers a partition without a committed
//     offset with a null metadata string that Sarama cannot decode (real
//     Kafka sends an empty string), so the group never starts. Nothing the
//     consumer needs comes later, and Kafka 4 still serves every request
//     version 2.3 uses.
//   - Consumer.Return.Errors = true (watermill-kafka's default), so that
//     consumer errors reach the logger; ClientID = "oncebox-consumer".
//
// The Unmarshaler is watermill-kafka's DefaultMarshaler, which restores the
// message UUID from _watermill_message_uuid and every other header as
// metadata, oncebox_event_id included.
//
// Options change the result; StaticMember makes the consumer a static
// member of its group.
func RecommendedSubscriberConfig(brokers []string, consumerGroup string, opts ...SubscriberOption) kafkawm.SubscriberConfig {
	sc := kafkawm.DefaultSaramaSubscriberConfig()
	sc.ClientID = "oncebox-consumer"
	sc.Version = sarama.V2_3_0_0
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Offsets.AutoCommit.Enable = true
	sc.Consumer.Offsets.AutoCommit.Interval = time.Second
	cfg := kafkawm.SubscriberConfig{
		Brokers:               brokers,
		ConsumerGroup:         consumerGroup,
		Unmarshaler:           kafkawm.DefaultMarshaler{},
		OverwriteSaramaConfig: sc,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

// SubscriberOption changes the configuration RecommendedSubscriberConfig
// returns.
type SubscriberOption func(*kafkawm.SubscriberConfig)

// StaticMember makes the consumer a static member of its group (KIP-345,
// Sarama's Consumer.Group.InstanceId, the Java client's group.instance.id)
// under instanceID, which must be stable across restarts of one instance
// and unique among the group's instances (a pod name in a StatefulSet, a
// host name): a second consumer with the same id fences the first.
//
// A consumer that restarts, or crashes and is replaced, and rejoins with
// the same instanceID within the session timeout
// (Consumer.Group.Session.Timeout, 10s) gets its partitions back at once,
// without a rebalance, instead of after the dead member's session timeout.
// The other side: a static member does not leave the group when it closes
// (Sarama sends no LeaveGroup for it), so an instance that is shut down for
// good, not replaced, holds its partitions until its session times out,
// where a dynamic member would hand them over at once. Static membership
// needs Kafka 2.3, the Version RecommendedSubscriberConfig sets.
//
// watermill-kafka makes one group member per subscribed topic, all under
// this one id, and two members with one id fence each other for ever:
// subscribe through NewSubscriber, which gives each topic's member the id
// StaticInstanceID(instanceID, topic), or give each topic a subscriber
// with an id of its own.
func StaticMember(instanceID string) SubscriberOption {
	return func(c *kafkawm.SubscriberConfig) {
		if c.OverwriteSaramaConfig == nil {
			c.OverwriteSaramaConfig = kafkawm.DefaultSaramaSubscriberConfig()
		}
		c.OverwriteSaramaConfig.Consumer.Group.InstanceId = instanceID
	}
}

// CheckSubscriberConfig returns a human-readable warning for each setting of
// cfg that breaks the inbox's guarantees: a message that is never delivered,
// or an offset committed before the handler returned. It returns nothing for
// RecommendedSubscriberConfig(…) with a consumer group. A nil
// OverwriteSaramaConfig is checked as watermill-kafka's default, which
// NewSubscriber would use. docs/kafka.md explains each warning.
//
// With watermill-kafka v3.1.2 no setting makes the subscriber commit an
// offset before the ack (it marks on ack; Sarama's auto-commit commits only
// marked offsets), so the remaining way to commit early is in the handler:
// acking the message before its work is done, or handing it to a goroutine.
//
// A configuration with a static member id (StaticMember) is fine for one
// topic; for several, subscribe through NewSubscriber (an id per topic):
// watermill-kafka's own subscriber would give every topic's member the
// same id, and they would fence each other. The configuration does not
// say how many topics it will serve, so this is not a warning.
func CheckSubscriberConfig(cfg kafkawm.SubscriberConfig) []string {
	var w []string
	sc := cfg.OverwriteSaramaConfig
	if sc == nil {
		w = append(w, "OverwriteSaramaConfig is nil: watermill-kafka's default applies, which starts a new consumer group at the newest offset; use RecommendedSubscriberConfig")
		sc = kafkawm.DefaultSaramaSubscriberConfig()
	}
	if cfg.ConsumerGroup == "" {
		w = append(w, fmt.Sprintf("ConsumerGroup is empty: watermill-kafka then commits no offset and starts at %s on every start (events published while the service was down are never delivered, or all are delivered again), and every instance receives every event; set a consumer group per service", offsetName(sc.Consumer.Offsets.Initial)))
	}
	if sc.Consumer.Offsets.Initial != sarama.OffsetOldest {
		w = append(w, fmt.Sprintf("Consumer.Offsets.Initial is %s: a consumer group without a committed offset (a new service, a renamed group, offsets expired) skips every event already in the topic; set sarama.OffsetOldest", offsetName(sc.Consumer.Offsets.Initial)))
	}
	if sc.Consumer.Offsets.AutoCommit.Enable && sc.Consumer.Offsets.AutoCommit.Interval <= 0 {
		w = append(w, "Consumer.Offsets.AutoCommit.Interval is not positive: Sarama refuses the configuration; use 1s")
	}
	if !sc.Version.IsAtLeast(sarama.V0_11_0_0) {
		w = append(w, fmt.Sprintf("Version is %s, older than 0.11: record headers are not decoded, so oncebox_event_id is missing and the inbox refuses every message; set Version to the oldest broker's version, at least sarama.V0_11_0_0", sc.Version))
	}
	if len(cfg.Brokers) == 0 {
		w = append(w, "Brokers is empty: watermill-kafka refuses the configuration")
	}
	if sc.Consumer.Group.InstanceId != "" {
		// Sarama refuses an invalid instance id or a Version below 2.3, but
		// only when the subscriber starts.
		if err := sc.Validate(); err != nil {
			w = append(w, fmt.Sprintf("Consumer.Group.InstanceId %q: Sarama refuses the configuration: %v", sc.Consumer.Group.InstanceId, err))
		}
	}
	return w
}

func offsetName(o int64) string {
	switch o {
	case sarama.OffsetOldest:
		return "OffsetOldest"
	case sarama.OffsetNewest:
		return "OffsetNewest"
	default:
		return fmt.Sprintf("%d", o)
	}
}
