package poller

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"sync"
	"syscall"

	"github.com/oncebox/watermill-oncebox"
)

// IsUnavailable is the default Config.IsUnavailable. It reports whether a
// publish error means that the broker could not be reached or could not
// take the messages for now, rather than that it refused them:
//
//   - errors wrapping oncebox.ErrBrokerUnavailable (the kafka and rabbitmq
//     packages' publishers wrap their outages in it);
//   - network errors: any net.Error (dial, read and write errors, DNS
//     errors, timeouts), connection refused, reset or aborted, a broken
//     pipe, an unreachable host or network, io.EOF and io.ErrUnexpectedEOF
//     (a peer that hung up), any error whose Timeout method reports true,
//     context.DeadlineExceeded and context.Canceled;
//   - the errors of the recognisers registered with RegisterUnavailable. The
//     kafka module registers Sarama's outage errors (watermill-kafka's
//     publisher) and the rabbitmq module amqp091-go's and watermill-amqp's,
//     when a program imports them: a program relaying with watermill-kafka's
//     or watermill-amqp's own publisher and importing neither module gets
//     them with a blank import (import _ "github.com/oncebox/watermill-oncebox/kafka").
//
// The core package knows no broker client: each client's errors are known
// by the module that imports that client.
//
// An error it does not know is a refusal: the message counts an attempt
// (see the relay section of docs/design.md for how a plain publisher's
// whole-call error is narrowed down to the message at fault). To add
// errors of another client, register a recogniser or wrap it:
//
//	cfg.IsUnavailable = func(err error) bool { return poller.IsUnavailable(err) || isMyOutage(err) }
func IsUnavailable(err error) bool {
	if err == nil || isNilPointer(err) {
		return false
	}
	if errors.Is(err, oncebox.ErrBrokerUnavailable) || isNetworkError(err) {
		return true
	}
	recognisers := registered()
	if len(recognisers) == 0 {
		return false
	}
	return anyInChain(err, func(e error) bool {
		for _, r := range recognisers {
			if r(e) {
				return true
			}
		}
		return false
	})
}

var unavailableRegistry struct {
	mu          sync.RWMutex
	recognisers []func(error) bool
}

// RegisterUnavailable adds recognise to the errors IsUnavailable knows as
// outages. IsUnavailable calls it with the error and with each error that
// error wraps, one at a time: Unwrap() error and Unwrap() []error as the
// errors package follows them, hashicorp/go-multierror's WrappedErrors and
// pkg/errors' Cause (100 errors at most), never with nil. recognise must
// report true only for an error that means the broker cannot take the
// messages for now, be safe for concurrent use and not panic.
//
// A broker client's module calls it from an init function, as the kafka
// and rabbitmq modules do for Sarama and amqp091-go: the relay then knows
// those clients' errors in every program that imports the module. A nil
// recognise is ignored.
func RegisterUnavailable(recognise func(err error) bool) {
	if recognise == nil {
		return
	}
	unavailableRegistry.mu.Lock()
	defer unavailableRegistry.mu.Unlock()
	unavailableRegistry.recognisers = append(unavailableRegistry.recognisers, recognise)
}

func registered() []func(error) bool {
	unavailableRegistry.mu.RLock()
	defer unavailableRegistry.mu.RUnlock()
	// Capped at its length: a later registration appends past what the
	// caller reads, never into it.
	return unavailableRegistry.recognisers[:len(unavailableRegistry.recognisers):len(unavailableRegistry.recognisers)]
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
