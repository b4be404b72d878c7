package kafka_test

import (
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/kafka"
)

// requireWarning fails unless one of warnings contains each of parts.
func requireWarning(t *testing.T, warnings []string, parts ...string) {
	t.Helper()
	for _, part := range parts {
		found := false
		for _, w := range warnings {
			found = found || strings.Contains(w, part)
		}
		require.True(t, found, "no warning mentions %q in %q", part, warnings)
	}
}

func TestRecommendedSaramaConfigIsValid(t *testing.T) {
	t.Parallel()
	cfg := kafka.RecommendedSaramaConfig()
	require.NoError(t, cfg.Validate())
	require.Equal(t, sarama.WaitForAll, cfg.Producer.RequiredAcks)
	require.True(t, cfg.Producer.Idempotent)
	require.Equal(t, 1, cfg.Net.MaxOpenRequests)
	require.True(t, cfg.Producer.Return.Successes)
	require.True(t, cfg.Producer.Return.Errors)
	require.True(t, cfg.Version.IsAtLeast(sarama.V0_11_0_0))
	require.NotSame(t, kafka.RecommendedSaramaConfig(), cfg, "a fresh config each call")
}

func TestCheckProducerConfig(t *testing.T) {
	t.Parallel()
	require.Empty(t, kafka.CheckProducerConfig(kafka.RecommendedSaramaConfig()))

	defaults := kafka.CheckProducerConfig(sarama.NewConfig())
	requireWarning(t, defaults, "RequiredAcks is 1", "Idempotent is false", "MaxOpenRequests is 5", "Return.Successes")
	requireWarning(t, kafka.CheckProducerConfig(nil), "nil", "RequiredAcks", "Idempotent")
	requireWarning(t, kafka.CheckProducerConfig(kafkawm.DefaultSaramaSyncPublisherConfig()), "RequiredAcks is 1", "Idempotent is false")

	for name, tc := range map[string]struct {
		change func(*sarama.Config)
		want   string
	}{
		"acks=0":        {func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.NoResponse }, "NoResponse"},
		"no retries":    {func(c *sarama.Config) { c.Producer.Retry.Max = 0 }, "Retry.Max is 0"},
		"old version":   {func(c *sarama.Config) { c.Version = sarama.V0_10_2_0 }, "older than 0.11"},
		"random":        {func(c *sarama.Config) { c.Producer.Partitioner = sarama.NewRandomPartitioner }, "RequiresConsistency"},
		"round robin":   {func(c *sarama.Config) { c.Producer.Partitioner = sarama.NewRoundRobinPartitioner }, "RequiresConsistency"},
		"transactional": {func(c *sarama.Config) { c.Producer.Transaction.ID = "relay" }, "Transaction.ID"},
		"no successes":  {func(c *sarama.Config) { c.Producer.Return.Successes = false }, "Return.Successes"},
	} {
		cfg := kafka.RecommendedSaramaConfig()
		tc.change(cfg)
		w := kafka.CheckProducerConfig(cfg)
		require.Len(t, w, 1, name)
		requireWarning(t, w, tc.want)
	}
	for name, p := range map[string]sarama.PartitionerConstructor{
		"hash":      sarama.NewHashPartitioner,
		"crc":       sarama.NewConsistentCRCHashPartitioner,
		"reference": sarama.NewReferenceHashPartitioner,
		"manual":    sarama.NewManualPartitioner,
		"custom":    sarama.NewCustomPartitioner(sarama.WithAbsFirst()),
	} {
		cfg := kafka.RecommendedSaramaConfig()
		cfg.Producer.Partitioner = p
		require.Empty(t, kafka.CheckProducerConfig(cfg), name)
	}
}

func TestNewPublisherLogsEachWarning(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	cfg := sarama.NewConfig() // acks=1, no idempotence
	cfg.Producer.Return.Successes = true
	logger := watermill.NewCaptureLogger()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs, SaramaConfig: cfg}, logger)
	require.NoError(t, err, "a weak configuration is warned about, not refused")
	defer pub.Close()

	var logged []string
	for _, m := range logger.Captured()[watermill.InfoLogLevel] {
		if strings.HasPrefix(m.Msg, "WARNING: ") {
			logged = append(logged, strings.TrimPrefix(m.Msg, "WARNING: "))
		}
	}
	require.Equal(t, kafka.CheckProducerConfig(cfg), logged)
	require.NotEmpty(t, logged)

	quiet := watermill.NewCaptureLogger()
	pub2, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: addrs}, quiet)
	require.NoError(t, err)
	defer pub2.Close()
	for _, m := range quiet.Captured()[watermill.InfoLogLevel] {
		require.NotContains(t, m.Msg, "WARNING")
	}
}

func TestNewPublisherRefusesAnInvalidConfig(t *testing.T) {
	t.Parallel()
	_, err := kafka.NewPublisher(kafka.PublisherConfig{}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "Brokers")

	for name, change := range map[string]func(*sarama.Config){
		"no successes":       func(c *sarama.Config) { c.Producer.Return.Successes = false },
		"transactional":      func(c *sarama.Config) { c.Producer.Transaction.ID = "relay" },
		"idempotent acks=1":  func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.WaitForLocal },
		"idempotent 5 in fl": func(c *sarama.Config) { c.Net.MaxOpenRequests = 5 },
	} {
		cfg := kafka.RecommendedSaramaConfig()
		change(cfg)
		_, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: []string{"127.0.0.1:1"}, SaramaConfig: cfg}, nil)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
	}
}

func TestCheckSubscriberConfig(t *testing.T) {
	t.Parallel()
	brokers := []string{"127.0.0.1:9092"}
	rec := kafka.RecommendedSubscriberConfig(brokers, "orders-service")
	require.Empty(t, kafka.CheckSubscriberConfig(rec))
	require.NoError(t, rec.OverwriteSaramaConfig.Validate())
	require.Equal(t, sarama.OffsetOldest, rec.OverwriteSaramaConfig.Consumer.Offsets.Initial)

	requireWarning(t, kafka.CheckSubscriberConfig(kafka.RecommendedSubscriberConfig(brokers, "")), "ConsumerGroup is empty")

	// watermill-kafka's defaults: no group, newest offset.
	requireWarning(t, kafka.CheckSubscriberConfig(kafkawm.SubscriberConfig{Brokers: brokers}),
		"OverwriteSaramaConfig is nil", "ConsumerGroup is empty", "Initial is OffsetNewest")
	requireWarning(t, kafka.CheckSubscriberConfig(kafkawm.SubscriberConfig{Brokers: brokers, ConsumerGroup: "g",
		OverwriteSaramaConfig: kafkawm.DefaultSaramaSubscriberConfig()}), "Initial is OffsetNewest")

	old := kafka.RecommendedSubscriberConfig(brokers, "g")
	old.OverwriteSaramaConfig.Version = sarama.V0_10_2_0
	requireWarning(t, kafka.CheckSubscriberConfig(old), "older than 0.11")

	noBrokers := kafka.RecommendedSubscriberConfig(nil, "g")
	requireWarning(t, kafka.CheckSubscriberConfig(noBrokers), "Brokers is empty")

	// Sarama's auto-commit commits only marked offsets and watermill-kafka
	// marks on ack: either setting is safe, neither is warned about.
	manual := kafka.RecommendedSubscriberConfig(brokers, "g")
	manual.OverwriteSaramaConfig.Consumer.Offsets.AutoCommit.Enable = false
	require.Empty(t, kafka.CheckSubscriberConfig(manual))
}

func TestStaticMember(t *testing.T) {
	t.Parallel()
	brokers := []string{"127.0.0.1:9092"}
	static := kafka.RecommendedSubscriberConfig(brokers, "g", kafka.StaticMember("orders-consumer-0"))
	require.Equal(t, "orders-consumer-0", static.OverwriteSaramaConfig.Consumer.Group.InstanceId)
	require.NoError(t, static.OverwriteSaramaConfig.Validate(), "Version 2.3 allows static membership")
	require.Empty(t, kafka.CheckSubscriberConfig(static))
	require.Empty(t, kafka.RecommendedSubscriberConfig(brokers, "g").OverwriteSaramaConfig.Consumer.Group.InstanceId)

	// Sarama refuses these only when the subscriber starts.
	requireWarning(t, kafka.CheckSubscriberConfig(kafka.RecommendedSubscriberConfig(brokers, "g", kafka.StaticMember("a b"))),
		`Consumer.Group.InstanceId "a b"`)
	old := kafka.RecommendedSubscriberConfig(brokers, "g", kafka.StaticMember("c-0"))
	old.OverwriteSaramaConfig.Version = sarama.V2_2_0_0
	requireWarning(t, kafka.CheckSubscriberConfig(old), "Version >= 2.3")
}

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{sarama.ErrOutOfBrokers, sarama.ErrNotConnected, sarama.ErrClosedClient,
		sarama.ErrShuttingDown, sarama.ErrNotEnoughReplicas, sarama.ErrRequestTimedOut, sarama.ErrLeaderNotAvailable,
		oncebox.ErrBrokerUnavailable} {
		require.True(t, kafka.IsUnavailable(err), "%v", err)
	}
	for _, err := range []error{nil, sarama.ErrMessageSizeTooLarge, sarama.ErrInvalidMessage,
		sarama.ErrUnknownTopicOrPartition, sarama.ErrTopicAuthorizationFailed, sarama.ConfigurationError("x"),
		oncebox.ErrInvalidInput} {
		require.False(t, kafka.IsUnavailable(err), "%v", err)
	}
}

// The publisher says it keeps a key's order within a call (so an ordered
// type's batches may carry several events of a key) only with an
// idempotent producer, one request in flight and a hash partitioner.
func TestPublisherKeepsKeyOrderOnlyWhenItsConfigDoes(t *testing.T) {
	for name, c := range map[string]struct {
		change func(*sarama.Config)
		keeps  bool
	}{
		"recommended":                {func(*sarama.Config) {}, true},
		"not idempotent":             {func(c *sarama.Config) { c.Producer.Idempotent = false }, false},
		"five requests in flight":    {func(c *sarama.Config) { c.Net.MaxOpenRequests = 5; c.Producer.Idempotent = false }, false},
		"random partitioner":         {func(c *sarama.Config) { c.Producer.Partitioner = sarama.NewRandomPartitioner }, false},
		"round robin partitioner":    {func(c *sarama.Config) { c.Producer.Partitioner = sarama.NewRoundRobinPartitioner }, false},
		"reference hash partitioner": {func(c *sarama.Config) { c.Producer.Partitioner = sarama.NewReferenceHashPartitioner }, true},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := kafka.RecommendedSaramaConfig()
			c.change(cfg)
			p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: []string{"127.0.0.1:1"}, SaramaConfig: cfg}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			require.Equal(t, c.keeps, p.KeepsKeyOrder())
		})
	}
}
