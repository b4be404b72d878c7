package poller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// The default classification knows the standard library's network errors,
// as real connections produce them, whoever wraps them; an error it does
// not know, a database error among them, is a refusal.
func TestIsUnavailableKnowsNetworkErrors(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: a real "connection refused".
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, refused := net.Dial("tcp", addr)
	require.Error(t, refused)

	// A read past its deadline: a real timeout.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(-time.Second)))
	_, timeout := conn.Read(make([]byte, 1))
	require.ErrorIs(t, timeout, os.ErrDeadlineExceeded)

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()

	unavailable := map[string]error{
		"sentinel":           fmt.Errorf("rabbitmq: %w: dial", oncebox.ErrBrokerUnavailable),
		"connection refused": fmt.Errorf("cannot produce message: %w", refused),
		"read timeout":       fmt.Errorf("cannot publish: %w", timeout),
		"dns":                &net.DNSError{Err: "no such host", Name: "kafka-0.internal", IsNotFound: true},
		"deadline":           fmt.Errorf("publish: %w", ctx.Err()),
		"eof":                fmt.Errorf("read response: %w", io.EOF),
		"unexpected eof":     fmt.Errorf("read response: %w", io.ErrUnexpectedEOF),
		"reset":              &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		"broken pipe":        fmt.Errorf("write: %w", syscall.EPIPE),
		"joined":             errors.Join(errors.New("first"), fmt.Errorf("second: %w", syscall.ECONNREFUSED)),
	}
	for name, err := range unavailable {
		require.True(t, poller.IsUnavailable(err), "%s: %v", name, err)
	}
	refusals := map[string]error{
		"nil":                nil,
		"plain":              errors.New("record too large"),
		"text of an outage":  errors.New("the broker says: kafka: broker not connected, but this is a payload error"),
		"schema registry":    fmt.Errorf("cannot marshal message: %w", errors.New("schema registry says no")),
		"typed nil":          (*net.OpError)(nil),
		"prefix of no error": errors.New("publisher closed the door on this message"),
	}
	for name, err := range refusals {
		require.False(t, poller.IsUnavailable(err), "%s: %v", name, err)
	}
}

// The core knows no broker client: the texts of Sarama's and
// watermill-amqp's outage errors are refusals for it alone. The kafka and
// rabbitmq modules teach them to it (RegisterUnavailable), when imported.
func TestIsUnavailableKnowsNoBrokerClient(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		errors.New("kafka: broker not connected"),
		errors.New("kafka: client has run out of available brokers to talk to"),
		errors.New("circuit breaker is open"),
		errors.New("not connected to AMQP"),
		errors.New("publisher closed"),
	} {
		require.False(t, poller.IsUnavailable(err), "%v", err)
	}
}

// testClientOutage is the outage error of a broker client the core does
// not know.
type testClientOutage struct{ partition int }

func (e testClientOutage) Error() string {
	return fmt.Sprintf("test client: partition %d offline", e.partition)
}

// multiError joins errors as hashicorp/go-multierror does.
type multiError []error

func (m multiError) Error() string          { return fmt.Sprintf("%d errors", len(m)) }
func (m multiError) WrappedErrors() []error { return m }

// A registered recogniser makes IsUnavailable know a client's errors
// wherever they are in the chain, wrapped, joined or in a multi-error; it
// is never called with nil, and errors it does not know stay refusals.
func TestRegisterUnavailable(t *testing.T) {
	t.Parallel()
	poller.RegisterUnavailable(nil) // ignored
	poller.RegisterUnavailable(func(err error) bool {
		if err == nil {
			panic("called with nil")
		}
		var o testClientOutage
		return errors.As(err, &o) && o.partition >= 0
	})
	require.True(t, poller.IsUnavailable(testClientOutage{partition: 1}))
	require.True(t, poller.IsUnavailable(fmt.Errorf("cannot produce message 42: %w", testClientOutage{partition: 2})))
	require.True(t, poller.IsUnavailable(errors.Join(errors.New("first"), testClientOutage{partition: 3})))
	require.True(t, poller.IsUnavailable(fmt.Errorf("send: %w", multiError{errors.New("record too large"), testClientOutage{partition: 4}})))
	require.False(t, poller.IsUnavailable(testClientOutage{partition: -1}), "the recogniser says no")
	require.False(t, poller.IsUnavailable(fmt.Errorf("send: %w", multiError{errors.New("record too large"), nil})))
	require.False(t, poller.IsUnavailable(errors.New("test client: partition 1 offline")), "the text alone is not the error")
}
