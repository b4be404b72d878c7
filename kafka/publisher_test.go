package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/kafka"
)

// event builds a message as the relay rebuilds it from an outbox row: the
// oncebox headers, a user metadata entry and, when key is not empty, the
// ordering key.
func event(t testing.TB, eventType, key string, payload []byte) *message.Message {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	msg := message.NewMessage(watermill.NewUUID(), payload)
	msg.Metadata.Set(oncebox.HeaderEventID, id.String())
	msg.Metadata.Set(oncebox.HeaderEventType, eventType)
	msg.Metadata.Set("trace_id", "trace-"+id.String()[:8])
	oncebox.SetKey(msg, key)
	return msg
}

func TestPublishBatchWritesKeyValueAndHeaders(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
	pub := newPublisher(t, addrs, nil)

	const n = 50
	msgs := make([]*message.Message, n)
	for i := range msgs {
		key := fmt.Sprintf("order-%d", i%7)
		if i%10 == 9 {
			key = "" // no key: no Kafka key, no oncebox_key header
		}
		msgs[i] = event(t, "order-created", key, []byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	results, err := pub.PublishBatch("orders", msgs...)
	require.NoError(t, err)
	require.Len(t, results, n)
	for i, r := range results {
		require.NoError(t, r, "message %d", i)
	}

	byUUID := map[string]*message.Message{}
	for _, m := range msgs {
		byUUID[m.UUID] = m
	}
	recs := readRecords(t, addrs, "orders", n)
	require.Len(t, recs, n)
	for _, r := range recs {
		h := headers(t, r)
		msg, ok := byUUID[h[kafka.UUIDHeader]]
		require.True(t, ok, "header %s = %q is no published UUID", kafka.UUIDHeader, h[kafka.UUIDHeader])
		delete(byUUID, msg.UUID)

		require.Equal(t, msg.Payload, message.Payload(r.Value))
		want := map[string]string{kafka.UUIDHeader: msg.UUID}
		for k, v := range msg.Metadata {
			want[k] = v
		}
		require.Equal(t, want, h, "every metadata entry is a header, plus the UUID")
		require.Equal(t, kafka.UUIDHeader, r.Headers[0].Key, "the UUID header comes first")
		require.NotEmpty(t, h[oncebox.HeaderEventID])
		require.Equal(t, "order-created", h[oncebox.HeaderEventType])
		if key := oncebox.Key(msg); key != "" {
			require.Equal(t, key, string(r.Key))
			require.Equal(t, key, h[oncebox.HeaderKey])
		} else {
			require.Nil(t, r.Key, "a message without oncebox_key has no Kafka key")
			require.NotContains(t, h, oncebox.HeaderKey)
		}
	}
	require.Empty(t, byUUID, "every message was read back")
}

func TestSameKeyLandsInOnePartitionInPublishOrder(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(6, "orders"))
	pub := newPublisher(t, addrs, nil)

	const keys, perKey, batches = 12, 40, 4
	var seq [keys]int
	total := 0
	for b := 0; b < batches; b++ {
		var msgs []*message.Message
		for i := 0; i < keys*perKey/batches; i++ {
			k := (i*5 + b) % keys // interleave the keys inside each batch
			msgs = append(msgs, event(t, "order-updated", fmt.Sprintf("order-%d", k),
				[]byte(fmt.Sprintf("%d:%d", k, seq[k]))))
			seq[k]++
		}
		total += len(msgs)
		require.NoError(t, pub.Publish("orders", msgs...))
	}

	partitionOf := map[string]int32{}
	next := map[string]int{}
	usedPartitions := map[int32]bool{}
	// Records come back per partition in offset order.
	for _, r := range readRecords(t, addrs, "orders", total) {
		key := string(r.Key)
		if p, ok := partitionOf[key]; ok {
			require.Equal(t, p, r.Partition, "key %s changed partition", key)
		}
		partitionOf[key] = r.Partition
		usedPartitions[r.Partition] = true
		var k, s int
		_, err := fmt.Sscanf(string(r.Value), "%d:%d", &k, &s)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("order-%d", k), key)
		require.Equal(t, next[key], s, "key %s out of order at offset %d", key, r.Offset)
		next[key]++
	}
	require.Len(t, partitionOf, keys)
	require.Greater(t, len(usedPartitions), 1, "different keys spread over partitions")
}

func TestClusterClosedIsUnavailable(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]func() *sarama.Config{
		"recommended config": kafka.RecommendedSaramaConfig,
		"short timeouts":     fastFailConfig,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testClusterClosedIsUnavailable(t, cfg())
		})
	}
}

func testClusterClosedIsUnavailable(t *testing.T, cfg *sarama.Config) {
	cluster, addrs := newCluster(t, kfake.SeedTopics(2, "orders"))
	pub := newPublisher(t, addrs, cfg)

	msgs := []*message.Message{event(t, "e", "a", []byte("1")), event(t, "e", "b", []byte("2")), event(t, "e", "", []byte("3"))}
	results, err := pub.PublishBatch("orders", msgs...)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil, nil}, results)

	cluster.Close()
	for attempt := range 3 { // the first meets dead connections, the next ones Sarama's open circuit breaker
		start := time.Now()
		results, err = pub.PublishBatch("orders", msgs...)
		elapsed := time.Since(start)
		require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable, "attempt %d", attempt)
		require.Less(t, elapsed, 30*time.Second, "attempt %d", attempt)
		t.Logf("attempt %d: unavailable after %s: %v", attempt, elapsed, err)
		require.Len(t, results, len(msgs))
		for i, r := range results {
			require.ErrorIs(t, r, oncebox.ErrBrokerUnavailable, "message %d", i)
			require.True(t, kafka.IsUnavailable(r))
		}
	}
	require.ErrorIs(t, pub.Publish("orders", msgs...), oncebox.ErrBrokerUnavailable)
}

func TestClusterClosedDuringASend(t *testing.T) {
	t.Parallel()
	cluster, addrs := newCluster(t, kfake.SeedTopics(4, "orders"))
	pub := newPublisher(t, addrs, fastFailConfig())

	payload := bytes.Repeat([]byte("x"), 1000)
	var wg sync.WaitGroup
	type outcome struct {
		results []error
		err     error
	}
	outcomes := make(chan outcome, 8)
	for g := range 8 {
		msgs := make([]*message.Message, 2000)
		for i := range msgs {
			msgs[i] = event(t, "e", strconv.Itoa(g*7+i%13), payload)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results, err := pub.PublishBatch("orders", msgs...)
			outcomes <- outcome{results, err}
		}()
	}
	// Close the cluster once the first produce request arrived, while the
	// rest of the 16,000 messages are queued or in flight.
	produced := make(chan struct{})
	var once sync.Once
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		once.Do(func() { close(produced) })
		return nil, nil, false
	})
	select {
	case <-produced:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no produce request within 10s")
	}
	cluster.Close()
	wg.Wait()
	close(outcomes)
	for o := range outcomes {
		if o.err != nil {
			require.ErrorIs(t, o.err, oncebox.ErrBrokerUnavailable)
		}
		require.Len(t, o.results, 2000)
		for _, r := range o.results {
			if r != nil {
				require.ErrorIs(t, r, oncebox.ErrBrokerUnavailable, "only unavailability, no rejection: %v", r)
			}
		}
	}
}

func TestHungBrokerIsUnavailableWithinTheTimeouts(t *testing.T) {
	t.Parallel()
	cluster, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	cfg := fastFailConfig()
	cfg.Net.ReadTimeout = 500 * time.Millisecond
	cfg.Producer.Retry.Max = 1
	pub := newPublisher(t, addrs, cfg)
	// Every produce request is read and never answered.
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, true
	})

	start := time.Now()
	results, err := pub.PublishBatch("orders", event(t, "e", "a", []byte("1")), event(t, "e", "a", []byte("2")))
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.Less(t, time.Since(start), 30*time.Second)
	for _, r := range results {
		require.ErrorIs(t, r, oncebox.ErrBrokerUnavailable)
	}
	t.Logf("unavailable after %s: %v", time.Since(start), err)
}

func TestCancelledContextStopsTheWait(t *testing.T) {
	t.Parallel()
	cluster, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	cfg := fastFailConfig()
	cfg.Net.ReadTimeout = 2 * time.Second
	cfg.Producer.Retry.Max = 1
	pub := newPublisher(t, addrs, cfg)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, true
	})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	msg := event(t, "e", "a", []byte("1"))
	msg.SetContext(ctx)
	start := time.Now()
	results, err := pub.PublishBatch("orders", msg)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 1500*time.Millisecond, "returned when the context ended, before Sarama's timeout")
	require.ErrorIs(t, results[0], oncebox.ErrBrokerUnavailable)
	// Close waits for the abandoned send (Sarama's timeouts bound it).
	require.NoError(t, pub.Close())
}

func TestRejectedMessagesFailAlone(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	pub := newPublisher(t, addrs, nil)

	reserved := event(t, "e", "a", []byte("reserved"))
	reserved.Metadata.Set(kafka.UUIDHeader, "mine")
	msgs := []*message.Message{
		event(t, "e", "a", []byte("first")),
		event(t, "e", "a", bytes.Repeat([]byte("x"), 2<<20)), // over Producer.MaxMessageBytes (1 MiB)
		event(t, "e", "a", []byte("third")),
		nil,
		reserved,
		event(t, "e", "a", []byte("last")),
	}
	results, err := pub.PublishBatch("orders", msgs...)
	require.NoError(t, err, "a rejection is not the whole call's fate")
	require.Len(t, results, len(msgs))
	require.NoError(t, results[0])
	require.ErrorContains(t, results[1], "larger than configured Producer.MaxMessageBytes")
	var cfgErr sarama.ConfigurationError
	require.ErrorAs(t, results[1], &cfgErr)
	require.False(t, kafka.IsUnavailable(results[1]))
	require.NoError(t, results[2])
	require.ErrorIs(t, results[3], oncebox.ErrInvalidInput)
	require.ErrorIs(t, results[4], oncebox.ErrInvalidInput)
	require.NoError(t, results[5])

	var got []string
	for _, r := range readRecords(t, addrs, "orders", 3) {
		got = append(got, string(r.Value))
	}
	require.Equal(t, []string{"first", "third", "last"}, got)

	err = pub.Publish("orders", msgs...)
	require.Error(t, err)
	require.NotErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.ErrorContains(t, err, "3 of 6 messages")
}

func TestBrokerMaxMessageBytesRejectsTheMessage(t *testing.T) {
	t.Parallel()
	// The topic takes at most 2,000 bytes a record batch; Sarama's own limit
	// (1 MiB) lets the big message through to the broker.
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000"}))
	pub := newPublisher(t, addrs, nil)

	results, err := pub.PublishBatch("orders", event(t, "e", "a", bytes.Repeat([]byte("x"), 5000)))
	require.NoError(t, err)
	require.ErrorIs(t, results[0], sarama.ErrMessageSizeTooLarge)
	require.False(t, kafka.IsUnavailable(results[0]))

	// The partition still takes what fits.
	results, err = pub.PublishBatch("orders", event(t, "e", "a", []byte("small")))
	require.NoError(t, err)
	require.NoError(t, results[0])
}

func TestUnknownTopicIsARejection(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders")) // no auto-creation
	pub := newPublisher(t, addrs, fastFailConfig())

	msgs := make([]*message.Message, 6)
	for i := range msgs {
		msgs[i] = event(t, "e", strconv.Itoa(i), []byte("x"))
	}
	results, err := pub.PublishBatch("no-such-topic", msgs...)
	require.NoError(t, err, "an unknown topic is the messages' fate, not an outage: the attempts count")
	unknown := 0
	for i, r := range results {
		require.Error(t, r, "message %d", i)
		require.NotErrorIs(t, r, oncebox.ErrBrokerUnavailable)
		if errors.Is(r, sarama.ErrUnknownTopicOrPartition) {
			unknown++
		}
	}
	// Sarama's circuit breaker refuses the messages after the third failed
	// look-up; they share the first ones' fate.
	require.GreaterOrEqual(t, unknown, 3)

	// The other topics are unaffected.
	results, err = pub.PublishBatch("orders", event(t, "e", "a", []byte("ok")))
	require.NoError(t, err)
	require.NoError(t, results[0])
}

func TestAutoCreatedTopic(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.AllowAutoTopicCreation())
	pub := newPublisher(t, addrs, nil)
	require.NoError(t, pub.Publish("created-on-first-use", event(t, "e", "a", []byte("1"))))
	require.Equal(t, "1", string(readRecords(t, addrs, "created-on-first-use", 1)[0].Value))
}

func TestEmptyInputs(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	pub := newPublisher(t, addrs, nil)

	results, err := pub.PublishBatch("orders")
	require.NoError(t, err)
	require.Empty(t, results)
	_, err = pub.PublishBatch("", event(t, "e", "", nil))
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)

	// A nil payload is sent as an empty value, not a null one (a tombstone).
	msg := message.NewMessage(watermill.NewUUID(), nil)
	require.NoError(t, pub.Publish("orders", msg))
	r := readRecords(t, addrs, "orders", 1)[0]
	require.NotNil(t, r.Value)
	require.Empty(t, r.Value)
}

func TestPublishAfterClose(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs}, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	require.NoError(t, pub.Close(), "Close is idempotent")

	results, err := pub.PublishBatch("orders", event(t, "e", "a", []byte("1")))
	require.ErrorIs(t, err, oncebox.ErrClosed)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable, "a closing relay releases the batch")
	require.ErrorIs(t, results[0], oncebox.ErrClosed)
	require.ErrorIs(t, pub.Publish("orders", event(t, "e", "a", []byte("1"))), oncebox.ErrClosed)
}

func TestConcurrentPublishAndClose(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs}, nil)
	require.NoError(t, err)

	var wg sync.WaitGroup
	var confirmed atomic.Int64
	for g := range 8 {
		msgs := make([]*message.Message, 50)
		for i := range msgs {
			msgs[i] = event(t, "e", strconv.Itoa(g), []byte(strconv.Itoa(i)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range msgs {
				results, err := pub.PublishBatch("orders", m)
				if err != nil {
					assert.ErrorIs(t, err, oncebox.ErrClosed)
					return
				}
				assert.NoError(t, results[0])
				confirmed.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return confirmed.Load() > 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, pub.Close(), "Close while sends are in flight neither panics nor fails")
	wg.Wait()
}

// TestPublisherRecoversWhenTheClusterReturns shows that a long-running relay
// needs no new Publisher after an outage: once the brokers are back (and
// Sarama's circuit breakers closed, 10s after they opened), sends succeed.
func TestPublisherRecoversWhenTheClusterReturns(t *testing.T) {
	t.Parallel()
	first, addrs := newCluster(t, kfake.SeedTopics(2, "orders"))
	_, port, err := net.SplitHostPort(addrs[0])
	require.NoError(t, err)
	pub := newPublisher(t, addrs, fastFailConfig())
	require.NoError(t, pub.Publish("orders", event(t, "e", "a", []byte("before"))))

	first.Close()
	for range 3 { // enough failed look-ups to open the circuit breakers
		_, err = pub.PublishBatch("orders", event(t, "e", "a", []byte("during")))
		require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	}
	require.ErrorContains(t, err, "circuit breaker is open")

	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	_, again := newCluster(t, kfake.Ports(p), kfake.SeedTopics(2, "orders"))
	require.Equal(t, addrs, again)
	var results []error
	require.Eventually(t, func() bool {
		results, err = pub.PublishBatch("orders", event(t, "e", "a", []byte("after")))
		return err == nil
	}, 25*time.Second, 200*time.Millisecond, "sends resume: %v", err)
	require.NoError(t, results[0])
	require.Equal(t, "after", string(readRecords(t, again, "orders", 1)[0].Value))
}

// The outbox publisher refuses oncebox.HeaderMessageUUID as metadata so
// that this relay never meets it; both must name the same header.
func TestUUIDHeaderIsTheReservedOne(t *testing.T) {
	t.Parallel()
	require.Equal(t, oncebox.HeaderMessageUUID, kafka.UUIDHeader)
}
