package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

// TestAdminServeRefusesBadBasePaths runs admin serve against the real
// PostgreSQL with base paths http.ServeMux cannot serve: each is a usage
// error naming the base path, before anything listens, never a panic.
func TestAdminServeRefusesBadBasePaths(t *testing.T) {
	t.Parallel()
	for _, base := range []string{
		"dlq", "/dlq/", "/", "/a//b", "/a/./b", "/a/../b", "/a/..", "//dlq", "/a/{id}", "/{$}", "/a{", "/a}",
		"/a b", "/a\tb", "/a\x00b", "/a%2Fb", "/a?b", "/a#b", "/d\xffq",
	} {
		var stderr bytes.Buffer
		listened := false
		var code int
		require.NotPanics(t, func() {
			code = runEnv(env{args: []string{"--dsn", pgtest.DSN(), "admin", "serve", "--addr", "127.0.0.1:0",
				"--token", "s3cret-token-for-tests", "--base-path", base},
				stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &stderr,
				getenv: func(string) string { return "" }, onListen: func(string) { listened = true }})
		}, "base path %q", base)
		require.Equal(t, exitUsage, code, "base path %q: %s", base, stderr.String())
		require.False(t, listened, "base path %q", base)
		require.Contains(t, stderr.String(), fmt.Sprintf("%q", base), "the error names the base path")
		require.Contains(t, stderr.String(), "--base-path")
	}
}

// startServe runs admin serve on the real PostgreSQL with extra flags and
// returns its address; the server is stopped at the end of the test.
func startServe(t *testing.T, flags ...string) string {
	t.Helper()
	addr, _ := startServeEnv(t, func(string) string { return "" },
		append([]string{"--token", "s3cret-token-for-tests"}, flags...)...)
	return addr
}

// startServeEnv is startServe with the environment getenv and no token
// flag of its own; it also returns the server's stderr.
func startServeEnv(t *testing.T, getenv func(string) string, flags ...string) (string, *syncBuffer) {
	t.Helper()
	s := pgtest.NewSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	errOut := &syncBuffer{}
	args := append([]string{"--dsn", pgtest.DSN(), "--schema", s.Name, "admin", "serve",
		"--addr", "127.0.0.1:0"}, flags...)
	go func() {
		done <- runEnv(env{args: args, stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: errOut,
			rootCtx: ctx, getenv: getenv, onListen: func(a string) { addrc <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, 0, <-done, errOut.String())
	})
	select {
	case addr := <-addrc:
		return addr, errOut
	case code := <-done:
		done <- code
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}
	return "", nil
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitClosed reads conn until the server closes it and fails the test if
// that does not happen before the deadline, far beyond the server's bound.
func waitClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(15*time.Second)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open: %v", err)
	}
	// io.Copy returns nil at EOF; a reset is a close too.
}

// TestAdminServeClosesStalledConnections connects with a real TCP client
// that stalls its body, and one that idles after a request: with
// --read-timeout and --idle-timeout of 200ms the server closes both.
func TestAdminServeClosesStalledConnections(t *testing.T) {
	t.Parallel()
	addr := startServe(t, "--read-timeout", "200ms", "--idle-timeout", "200ms")

	// An unauthenticated client announces a body and stalls after a byte.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "PATCH /dlq/events HTTP/1.1\r\nHost: oncebox\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	waitClosed(t, conn)

	// The same, authenticated: the handler is reading the body.
	conn2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn2.Close()
	_, err = io.WriteString(conn2, "PATCH /dlq/events HTTP/1.1\r\nHost: oncebox\r\nAuthorization: Bearer s3cret-token-for-tests\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	waitClosed(t, conn2)

	// A keep-alive connection left idle after a complete request.
	conn3, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn3.Close()
	_, err = io.WriteString(conn3, "GET /metrics HTTP/1.1\r\nHost: oncebox\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(conn3)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, conn3.SetReadDeadline(time.Now().Add(15*time.Second)))
	_, err = br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the idle connection open: %v", err)
	}
	require.Error(t, err, "the server closes the idle connection")
}

// TestAdminServeLimitsHeaders: a request whose headers exceed 64 KiB is
// refused with 431 before any handler runs.
func TestAdminServeLimitsHeaders(t *testing.T) {
	t.Parallel()
	addr := startServe(t)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/dlq/events", nil)
	require.NoError(t, err)
	req.Header.Set("X-Padding", strings.Repeat("a", 100<<10))
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}
