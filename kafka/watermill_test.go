package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/poller"
)

// relayThroughWatermillKafka runs the relay (poller.New and Run) with
// watermill-kafka's own publisher built from cfg, as a user swapping
// Watermill's forwarder for the relay does, and returns the records of
// 29 keyed events.
func relayThroughWatermillKafka(t *testing.T, cfg kafkawm.PublisherConfig) ([]*message.Message, map[string]string) {
	t.Helper()
	s := pgtest.NewSchema(t)
	_, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
	cfg.Brokers = addrs
	pub, err := kafkawm.NewPublisher(cfg, watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })

	ocfg := oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{Polling: oncebox.PollingSettings{
			MinFixedDelay: 5 * time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}},
		Events: map[string]oncebox.EventSettings{"order-created": {Topic: "orders"}},
	}}
	msgs := commitEvents(t, s, ocfg, 29, "n")
	p, err := poller.New(s.Beginner, pub, poller.Config{
		Dialect: s.Dialect, Oncebox: ocfg, IsUnavailable: kafka.IsUnavailable}, watermill.NopLogger{})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	<-p.Running()

	keys := map[string]string{} // event id → record key
	for _, r := range readRecords(t, addrs, "orders", len(msgs)) {
		keys[headers(t, r)[oncebox.HeaderEventID]] = string(r.Key)
		if r.Key == nil {
			keys[headers(t, r)[oncebox.HeaderEventID]] = "<null>"
		}
	}
	require.Len(t, keys, len(msgs))
	return msgs, keys
}

// watermill-kafka's publisher with its default marshaler drops the key the
// relay puts in oncebox_key: every record has a null key. This is the loss
// KeyMarshaler fixes (and that CheckWatermillPublisherConfig reports).
func TestWatermillKafkaPublisherDropsKeysWithItsDefaultMarshaler(t *testing.T) {
	t.Parallel()
	msgs, keys := relayThroughWatermillKafka(t, kafkawm.PublisherConfig{OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()})
	for _, m := range msgs {
		require.NotEmpty(t, oncebox.Key(m))
		require.Equal(t, "<null>", keys[m.Metadata.Get(oncebox.HeaderEventID)])
	}
}

// With KeyMarshaler, watermill-kafka's publisher writes each event's key.
func TestKeyMarshalerKeepsKeysThroughWatermillKafkaPublisher(t *testing.T) {
	t.Parallel()
	msgs, keys := relayThroughWatermillKafka(t, kafkawm.PublisherConfig{
		Marshaler: kafka.KeyMarshaler(), OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()})
	for _, m := range msgs {
		require.Equal(t, oncebox.Key(m), keys[m.Metadata.Get(oncebox.HeaderEventID)])
	}
}

// KeyMarshaler writes what Publisher writes: a null key without
// oncebox_key, an empty (not null) value for a nil payload, the UUID and
// the metadata as headers; and its Unmarshal gives the message back.
func TestKeyMarshalerRecords(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	pub, err := kafkawm.NewPublisher(kafkawm.PublisherConfig{Brokers: addrs, Marshaler: kafka.KeyMarshaler(),
		OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()}, watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })

	keyed := event(t, "order-created", "customer-7", []byte(`{"n":1}`))
	unkeyed := message.NewMessage(watermill.NewUUID(), nil)
	unkeyed.Metadata.Set("source", "test")
	require.NoError(t, pub.Publish("orders", keyed, unkeyed))
	recs := readRecords(t, addrs, "orders", 2)
	require.Equal(t, "customer-7", string(recs[0].Key))
	require.Equal(t, keyed.UUID, headers(t, recs[0])[kafka.UUIDHeader])
	require.Equal(t, keyed.Metadata.Get(oncebox.HeaderEventID), headers(t, recs[0])[oncebox.HeaderEventID])
	require.Nil(t, recs[1].Key, "no oncebox_key: a null key, spread by the hash partitioner")
	require.NotNil(t, recs[1].Value)
	require.Empty(t, recs[1].Value, "a nil payload is an empty value, not a tombstone")
	require.Equal(t, "test", headers(t, recs[1])["source"])

	_, err = kafka.KeyMarshaler().Marshal("orders", message.NewMessage("1", nil).Copy())
	require.NoError(t, err)
	reserved := message.NewMessage("1", nil)
	reserved.Metadata.Set(kafka.UUIDHeader, "x")
	_, err = kafka.KeyMarshaler().Marshal("orders", reserved)
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
}

func TestCheckWatermillPublisherConfig(t *testing.T) {
	t.Parallel()
	brokers := []string{"127.0.0.1:9092"}
	require.Empty(t, kafka.CheckWatermillPublisherConfig(kafkawm.PublisherConfig{
		Brokers: brokers, Marshaler: kafka.KeyMarshaler(), OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()}))

	// watermill-kafka's defaults: no key, acks=1, no idempotence.
	w := kafka.CheckWatermillPublisherConfig(kafkawm.PublisherConfig{Brokers: brokers})
	requireWarning(t, w, "Marshaler is nil", "kafka.KeyMarshaler()")
	requireWarning(t, w, "OverwriteSaramaConfig is nil")
	requireWarning(t, w, "OverwriteSaramaConfig: Producer.RequiredAcks is 1")
	requireWarning(t, w, "OverwriteSaramaConfig: Producer.Idempotent is false")

	w = kafka.CheckWatermillPublisherConfig(kafkawm.PublisherConfig{
		Marshaler: kafkawm.DefaultMarshaler{}, OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()})
	requireWarning(t, w, "kafka.DefaultMarshaler does not make oncebox_key the record key")
	requireWarning(t, w, "Brokers is empty")
	require.Len(t, w, 2)

	// A partitioning marshaler on oncebox.Key keeps the keys but gives an
	// unkeyed message an empty key: one partition for all of them.
	w = kafka.CheckWatermillPublisherConfig(kafkawm.PublisherConfig{Brokers: brokers,
		Marshaler: kafkawm.NewWithPartitioningMarshaler(func(_ string, m *message.Message) (string, error) {
			return oncebox.Key(m), nil
		}),
		OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()})
	require.Len(t, w, 1)
	requireWarning(t, w, "gives a message without oncebox_key a non-null key")

	w = kafka.CheckWatermillPublisherConfig(kafkawm.PublisherConfig{Brokers: brokers,
		Marshaler: panicking{}, OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()})
	require.Len(t, w, 1)
	requireWarning(t, w, "Marshaler failed", "panicked")
}

type panicking struct{ kafkawm.DefaultMarshaler }

func (panicking) Marshal(string, *message.Message) (*sarama.ProducerMessage, error) { panic("boom") }

// The relay warns at start when watermill-kafka's publisher will drop the
// events' keys (any marshaler but KeyMarshaler), and not otherwise.
func TestRelayWarnsWhenWatermillKafkaPublisherDropsKeys(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := pgtest.NewSchema(t)
	for _, c := range []struct {
		name      string
		marshaler kafkawm.Marshaler
		warns     bool
	}{
		{"default marshaler", nil, true},
		{"partitioning marshaler", kafkawm.NewWithPartitioningMarshaler(func(string, *message.Message) (string, error) { return "", nil }), true},
		{"KeyMarshaler", kafka.KeyMarshaler(), false},
	} {
		pub, err := kafkawm.NewPublisher(kafkawm.PublisherConfig{Brokers: addrs, Marshaler: c.marshaler,
			OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()}, watermill.NopLogger{})
		require.NoError(t, err)
		logger := watermill.NewCaptureLogger()
		_, err = poller.New(s.Beginner, pub, poller.Config{Dialect: s.Dialect}, logger)
		require.NoError(t, err)
		warned := false
		for _, m := range logger.Captured()[watermill.InfoLogLevel] {
			if strings.Contains(m.Msg, "without kafka.KeyMarshaler()") {
				warned = true
			}
		}
		require.Equal(t, c.warns, warned, c.name)
		require.NoError(t, pub.Close())
	}
}
