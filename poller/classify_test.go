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
