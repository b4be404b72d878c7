package kafka

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"

	"github.com/oncebox/watermill-oncebox"
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
// Errors wrapping oncebox.ErrBrokerUnavailable are unavailable too.
//
// The Publisher uses it to classify errors. Users relaying with another
// Sarama-based publisher (watermill-kafka's) can pass it as
// poller.Config.IsUnavailable.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, oncebox.ErrBrokerUnavailable) {
		return true
	}
	for _, u := range unavailableErrors {
		if errors.Is(err, u) {
			return true
		}
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr), // dial, read and write errors, their timeouts
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), // the broker hung up
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	}
	return false
}
