package kafka

import (
	"errors"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"

	"github.com/oncebox/watermill-oncebox/poller"
)

// unavailableErrors are the Sarama errors that say the cluster could not
// take the message right now, as opposed to a rejection of the message
// itself: no broker reachable, the producer or client closed, no leader or
// not enough in-sync replicas, a request that timed out. A later send of the
// same message can succeed unchanged.
var unavailableErrors = []error{
	sarama.ErrOutOfBrokers,
	sarama.ErrNotConnected,
	sarama.ErrClosedClient,
	sarama.ErrShuttingDown,
	sarama.ErrBrokerNotFound,
	sarama.ErrControllerNotAvailable,
	sarama.ErrIncompleteResponse,
	sarama.ErrInsufficientData,
	sarama.ErrLeaderNotAvailable,
	sarama.ErrNotLeaderForPartition,
	sarama.ErrRequestTimedOut,
	sarama.ErrBrokerNotAvailable,
	sarama.ErrReplicaNotAvailable,
	sarama.ErrNetworkException,
	sarama.ErrNotEnoughReplicas,
	sarama.ErrNotEnoughReplicasAfterAppend,
	sarama.ErrKafkaStorageError,
	sarama.ErrNotController,
	// Sarama's topic and partition producers stop looking up a partition
	// for 10s after three failed metadata lookups in a row.
	breaker.ErrBreakerOpen,
}

// IsUnavailable reports whether err, returned by Sarama or by a Publisher,
// means that the Kafka cluster could not be reached or could not take the
// message for now (network errors, timeouts, no broker or leader available,
// the producer closed), rather than that the broker rejected the message.
// Errors wrapping oncebox.ErrBrokerUnavailable are unavailable too, and so
// is every error poller.IsUnavailable recognises.
//
// The Publisher uses it to classify errors. Users relaying with another
// Sarama-based publisher (watermill-kafka's) can pass it as
// poller.Config.IsUnavailable.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	for _, u := range unavailableErrors {
		if errors.Is(err, u) {
			return true
		}
	}
	// The sentinel, network and deadline errors, and what the recognisers
	// registered with the relay know (this module's, relay.go: Sarama's
	// errors by value, wrapped behind a sentinel, or of its former path).
	return poller.IsUnavailable(err)
}
