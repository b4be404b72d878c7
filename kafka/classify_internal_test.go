package kafka

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/poller"
)

// The poller's default IsUnavailable knows Sarama's outage errors without
// importing Sarama (by text and by type): it agrees with this package's
// IsUnavailable on every error of its list, with the real values of the
// Sarama version in go.mod, as watermill-kafka's publisher returns them.
func TestPollerDefaultKnowsEverySaramaOutageError(t *testing.T) {
	t.Parallel()
	for _, e := range unavailableErrors {
		// watermill-kafka: "cannot produce message <uuid>: " around the
		// SyncProducer's *ProducerError.
		err := fmt.Errorf("cannot produce message 42: %w", &sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: "orders"}, Err: e})
		require.True(t, IsUnavailable(err), "%v", err)
		require.True(t, poller.IsUnavailable(err), "%v", err)
	}
	// Sarama wraps the broker errors behind its sentinel (client.go).
	wrapped := sarama.Wrap(sarama.ErrOutOfBrokers, fmt.Errorf("dial tcp 127.0.0.1:9092: %w", sarama.ErrNotConnected))
	require.True(t, poller.IsUnavailable(fmt.Errorf("cannot produce message 42: %w", wrapped)), "%v", wrapped)

	for _, e := range []error{sarama.ErrMessageSizeTooLarge, sarama.ErrInvalidMessage, sarama.ErrInvalidTopic,
		sarama.ErrTopicAuthorizationFailed, sarama.ErrInvalidRecord, sarama.ConfigurationError("Producer.Retry.Max must be >= 0")} {
		err := fmt.Errorf("cannot produce message 42: %w", &sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: "orders"}, Err: e})
		require.False(t, IsUnavailable(err), "%v", err)
		require.False(t, poller.IsUnavailable(err), "a refusal: %v", err)
	}
}
