package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const flagWarning = "is visible to other users of the machine"

// authStatus sends GET /dlq/events/count to addr with the bearer token.
func authStatus(t *testing.T, addr, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/dlq/events/count", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminTokenFromFileOrEnv serves with the token of --token-file, then
// of $ONCEBOX_ADMIN_TOKEN: no warning; with --token: a warning on stderr.
func TestAdminTokenFromFileOrEnv(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("file-token-0123456789\n"), 0o600))
	addr, errOut := startServeEnv(t, noEnv, "--token-file", path)
	require.Equal(t, http.StatusOK, authStatus(t, addr, "file-token-0123456789"), "the trailing newline is not part of the token")
	require.Equal(t, http.StatusUnauthorized, authStatus(t, addr, "file-token"))
	require.NotContains(t, errOut.String(), flagWarning)
	require.NotContains(t, errOut.String(), "file-token")

	addr, errOut = startServeEnv(t, func(k string) string {
		if k == "ONCEBOX_ADMIN_TOKEN" {
			return "env-token-0123456789"
		}
		return ""
	})
	require.Equal(t, http.StatusOK, authStatus(t, addr, "env-token-0123456789"))
	require.NotContains(t, errOut.String(), flagWarning)

	addr, errOut = startServeEnv(t, noEnv, "--token", "flag-token-0123456789")
	require.Equal(t, http.StatusOK, authStatus(t, addr, "flag-token-0123456789"))
	require.Contains(t, errOut.String(), "oncebox: warning: --token "+flagWarning)
	require.NotContains(t, errOut.String(), "flag-token")
}

// TestAdminTokenFileErrors: a missing or empty token file, or a token given
// twice, is a usage error naming the flag, never quoting the token.
func TestAdminTokenFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	full := filepath.Join(dir, "full")
	require.NoError(t, os.WriteFile(full, []byte("secret-in-file"), 0o600))
	c := &cli{t: t}
	for _, args := range [][]string{
		{"--token-file", filepath.Join(dir, "missing")},
		{"--token-file", empty},
		{"--token-file", full, "--token", "other-token"},
		{"--token-file", full, "--insecure-no-auth"},
	} {
		r := c.run("", append([]string{"--dsn", "postgres://x@127.0.0.1/none", "admin", "serve"}, args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "--token-file")
		require.NotContains(t, r.stderr, "secret-in-file")
	}
}

// TestDSNWithPasswordWarns: a DSN with a password given as --dsn draws a
// warning (not quoting it); the same in $ONCEBOX_DSN, or a DSN without a
// password, does not.
func TestDSNWithPasswordWarns(t *testing.T) {
	t.Parallel()
	for dsn, warn := range map[string]bool{
		"mysql://app:Zq9Secret@127.0.0.1:1/db":                    true,
		"postgres://app:Zq9Secret@127.0.0.1:1/db?sslmode=disable": true,
		"postgres://app@127.0.0.1:1/db?password=Zq9Secret":        true,
		"host=127.0.0.1 port=1 user=app password=Zq9Secret":       true,
		"oracle://app:Zq9Secret@127.0.0.1:1/svc":                  true,
		"postgres://app@127.0.0.1:1/db?sslmode=disable":           false,
		"mysql://app@127.0.0.1:1/db":                              false,
	} {
		c := &cli{t: t}
		r := c.run("", "--dsn", dsn, "--timeout", "5s", "status")
		require.Equal(t, exitFailed, r.code, "%s: %s", dsn, r.stderr)
		require.Empty(t, leaks(r.stderr), r.stderr)
		if warn {
			require.Contains(t, r.stderr, "oncebox: warning: --dsn "+flagWarning, dsn)
		} else {
			require.NotContains(t, r.stderr, flagWarning, dsn)
		}
		var errOut, out syncBuffer
		code := runEnv(env{args: []string{"--timeout", "5s", "status"}, stdout: &out, stderr: &errOut,
			getenv: func(k string) string {
				if k == "ONCEBOX_DSN" {
					return dsn
				}
				return ""
			}})
		require.Equal(t, exitFailed, code, errOut.String())
		require.NotContains(t, errOut.String(), flagWarning, "$ONCEBOX_DSN: %s", dsn)
	}
}
