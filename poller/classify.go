package poller

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"

	"github.com/oncebox/watermill-oncebox"
)

// IsUnavailable is the default Config.IsUnavailable. It reports whether a
// publish error means that the broker could not be reached or could not
// take the messages for now, rather than that it refused them, for any
// publisher a Watermill user may already have, without configuration:
//
//   - errors wrapping oncebox.ErrBrokerUnavailable (the kafka and rabbitmq
//     packages' publishers wrap their outages in it);
//   - network errors: any net.Error (dial, read and write errors, DNS
//     errors, timeouts), connection refused, reset or aborted, a broken
//     pipe, an unreachable host or network, io.EOF and io.ErrUnexpectedEOF
//     (a peer that hung up), any error whose Timeout method reports true,
//     context.DeadlineExceeded and context.Canceled;
//   - Sarama's (watermill-kafka's publisher): no broker reachable, a broker
//     not connected, the client or producer closed or shutting down, an
//     open circuit breaker, and the broker's KErrors that say "not now"
//     (no leader, not the leader, request timed out, broker or replica not
//     available, network exception, not enough in-sync replicas, storage
//     error, not the controller);
//   - amqp091-go's (watermill-amqp's publisher): an *amqp.Error that is not
//     a soft channel exception about what was published, with code 320
//     (connection forced), 501 (frame error), 504 (channel or connection not
//     open, amqp.ErrClosed) or 506 (resource error), and watermill-amqp's
//     "not connected to AMQP" and closed-publisher errors.
//
// The core package does not import Sarama or amqp091-go (their users should
// not link the other's client): KError and *amqp.Error are recognised by
// their type's package path and name through reflection, and the sentinel
// errors that are plain errors.New values by their exact text, as the first
// part of an error in the chain. The kafka and rabbitmq packages' tests check
// these texts and codes against the real clients.
//
// An error it does not know is a refusal: the message counts an attempt
// (see the relay section of docs/design.md for how a plain publisher's
// whole-call error is narrowed down to the message at fault). To add
// errors of another client, wrap it:
//
//	cfg.IsUnavailable = func(err error) bool { return poller.IsUnavailable(err) || isMyOutage(err) }
func IsUnavailable(err error) bool {
	if err == nil || isNilPointer(err) {
		return false
	}
	if errors.Is(err, oncebox.ErrBrokerUnavailable) || isNetworkError(err) {
		return true
	}
	return anyInChain(err, func(e error) bool {
		return isSaramaUnavailable(e) || isAMQPUnavailable(e) || hasKnownText(e)
	})
}

// isNetworkError recognises the standard library's network and deadline
// errors, whoever wraps them.
func isNetworkError(err error) bool {
	var netErr net.Error
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &netErr), // dial, read, write and DNS errors and their timeouts
		errors.As(err, &timeout) && timeout.Timeout(),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), // the peer hung up
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	}
	return false
}

// saramaPackages are the import paths of Sarama, today's and its former one.
var saramaPackages = map[string]bool{"github.com/IBM/sarama": true, "github.com/Shopify/sarama": true}

// saramaUnavailableCodes are the Kafka protocol error codes (Sarama's
// KError) that say the cluster cannot take the message now, the same set as
// the kafka package's IsUnavailable: LEADER_NOT_AVAILABLE (5),
// NOT_LEADER_OR_FOLLOWER (6), REQUEST_TIMED_OUT (7), BROKER_NOT_AVAILABLE
// (8), REPLICA_NOT_AVAILABLE (9), NETWORK_EXCEPTION (13), NOT_ENOUGH_REPLICAS
// (19), NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), NOT_CONTROLLER (41),
// KAFKA_STORAGE_ERROR (56).
var saramaUnavailableCodes = map[int64]bool{5: true, 6: true, 7: true, 8: true, 9: true, 13: true, 19: true, 20: true, 41: true, 56: true}

// isSaramaUnavailable recognises a sarama.KError by its type, without
// importing Sarama.
func isSaramaUnavailable(e error) bool {
	t := reflect.TypeOf(e)
	if t.Name() != "KError" || !saramaPackages[t.PkgPath()] || t.Kind() != reflect.Int16 {
		return false
	}
	return saramaUnavailableCodes[reflect.ValueOf(e).Int()]
}

// amqpPackages are the import paths of the AMQP 0-9-1 client, today's and
// its former one.
var amqpPackages = map[string]bool{"github.com/rabbitmq/amqp091-go": true, "github.com/streadway/amqp": true}

// amqpUnavailableCodes are the AMQP reply codes that say the connection or
// channel went away or the broker lacks resources, not that it refused what
// was published: 320 CONNECTION_FORCED (the broker is shutting down or an
// operator closed the connection), 501 FRAME_ERROR (a broken stream), 504
// CHANNEL_ERROR (amqp.ErrClosed: the channel or connection is not open),
// 506 RESOURCE_ERROR.
var amqpUnavailableCodes = map[int64]bool{320: true, 501: true, 504: true, 506: true}

// isAMQPUnavailable recognises an *amqp.Error by its type, without importing
// amqp091-go. A soft exception raised by the broker (Server and Recover:
// 404 no such exchange, 406 precondition failed, …) is about what was
// published, so it is a refusal whatever its code.
func isAMQPUnavailable(e error) bool {
	t := reflect.TypeOf(e)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct || t.Elem().Name() != "Error" || !amqpPackages[t.Elem().PkgPath()] {
		return false
	}
	v := reflect.ValueOf(e)
	if v.IsNil() {
		return false
	}
	v = v.Elem()
	code, server, recoverable := v.FieldByName("Code"), v.FieldByName("Server"), v.FieldByName("Recover")
	if code.Kind() != reflect.Int || server.Kind() != reflect.Bool || recoverable.Kind() != reflect.Bool {
		return false
	}
	if server.Bool() && recoverable.Bool() {
		return false
	}
	return amqpUnavailableCodes[code.Int()]
}

// knownTexts are outage errors that their libraries create with
// errors.New, so that only their text identifies them without importing the
// library. An error in the chain matches when its text is one of these or
// starts with one followed by ": " (Sarama wraps the broker errors behind
// its sentinel that way). The texts are exact, long and prefixed, so a
// message-specific error does not match by chance; the kafka and rabbitmq
// packages' tests compare them with the libraries' values.
var knownTexts = []string{
	// Sarama (IBM/sarama errors.go).
	"kafka: client has run out of available brokers to talk to",               // ErrOutOfBrokers
	"kafka: broker not connected",                                             // ErrNotConnected
	"kafka: tried to use a client that was closed",                            // ErrClosedClient
	"kafka: message received by producer in process of shutting down",         // ErrShuttingDown
	"kafka: broker for ID is not found",                                       // ErrBrokerNotFound
	"kafka: controller is not available",                                      // ErrControllerNotAvailable
	"kafka: response did not contain all the expected topic/partition blocks", // ErrIncompleteResponse
	"kafka: insufficient data to decode packet, more bytes expected",          // ErrInsufficientData
	// go-resiliency's breaker.ErrBreakerOpen, which Sarama's producers open
	// for 10s after three failed metadata look-ups in a row (sony/gobreaker
	// uses the same text).
	"circuit breaker is open",
	// watermill-kafka v3's publisher after Close.
	"publisher closed",
	// watermill-amqp v3's publisher: its connection is being re-established,
	// or the publisher or its channel pool was closed.
	"not connected to AMQP",
	"pub/sub is connection closedChan",
	"channel pool is closed",
	"provider is closed",
}

func hasKnownText(e error) bool {
	msg := e.Error()
	for _, text := range knownTexts {
		if msg == text || (strings.HasPrefix(msg, text) && strings.HasPrefix(msg[len(text):], ": ")) {
			return true
		}
	}
	return false
}

// anyInChain reports whether match holds for err or any error it wraps:
// Unwrap() error and Unwrap() []error as the errors package follows them,
// hashicorp/go-multierror's WrappedErrors (Sarama and watermill-amqp join
// errors with it) and pkg/errors' Cause. It looks at 100 errors at most.
func anyInChain(err error, match func(error) bool) bool {
	stack := []error{err}
	for seen := 0; len(stack) > 0 && seen < 100; seen++ {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e == nil || isNilPointer(e) {
			continue
		}
		if match(e) {
			return true
		}
		switch u := e.(type) {
		case interface{ WrappedErrors() []error }:
			stack = append(stack, u.WrappedErrors()...)
		case interface{ Unwrap() []error }:
			stack = append(stack, u.Unwrap()...)
		case interface{ Unwrap() error }:
			stack = append(stack, u.Unwrap())
		case interface{ Cause() error }:
			stack = append(stack, u.Cause())
		}
	}
	return false
}

// isNilPointer reports a typed nil inside an error interface, whose Error
// method may panic.
func isNilPointer(e error) bool {
	v := reflect.ValueOf(e)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
