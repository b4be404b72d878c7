package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
