package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hostileDSNs hold the password "Zq9Secret" (or its halves "Zq9" and
// "Secret", split by a character that breaks parsing) in every form of
// connection string the CLI accepts, malformed in the ways a parser quotes
// back: a bad port, a #fragment, a quote, a bad escape, a bad driver
// parameter; and well-formed ones that fail to connect.
var hostileDSNs = []string{
	// MySQL / MariaDB
	"mariadb://app:Zq9Secret@127.0.0.1:badport/db",
	"mysql://app:Zq9Secret@127.0.0.1:badport/db",
	"mariadb://app:Zq9Secret@127.0.0.1:3306/db#fragment",
	"mysql://app:Zq9#Secret@127.0.0.1:3306/db",
	`mysql://app:Zq9"Secret@127.0.0.1:3306/db`,
	`mariadb://app:Zq9"Secret@127.0.0.1:badport/db#x`,
	"mysql://app:Zq9%ZZSecret@127.0.0.1:3306/db",
	"mysql://app:Zq9Secret@[::1/db",
	"mysql://app:Zq9Secret@127.0.0.1:3306/db?timeout=soon",
	"mysql://app:Zq9Secret@127.0.0.1:3306/db?tls=Zq9Secret",
	"mysql://app:Zq9Secret@127.0.0.1:1/db",
	"mysql://root:Zq9Secret@127.0.0.1:3306/test",
	"mysql://app:Zq9 Secret@127.0.0.1:3306/db",
	// PostgreSQL URLs
	"postgres://app:Zq9Secret@127.0.0.1:badport/db",
	"postgresql://app:Zq9Secret@127.0.0.1:5432/db#fragment",
	"postgres://app:Zq9#Secret@127.0.0.1:5432/db",
	`postgres://app:Zq9"Secret@127.0.0.1:5432/db`,
	`postgresql://app:Zq9"Secret@127.0.0.1:badport/db`,
	"postgres://app:Zq9%ZZSecret@127.0.0.1/db",
	"postgres://127.0.0.1/db?password=Zq9Secret&sslmode=bogus",
	"postgres://app:Zq9Secret@127.0.0.1:1/db?sslmode=disable",
	"postgres://app:Zq9Secret@127.0.0.1:5432/nosuchdb?sslmode=disable",
	// PostgreSQL key=value
	"host=127.0.0.1 port=badport user=app password=Zq9Secret",
	"host=127.0.0.1 user=app password='Zq9 Secret' sslmode=bogus",
	`host=127.0.0.1 user=app password=Zq9"Secret port=1 sslmode=disable`,
	"host=127.0.0.1 user=app password='Zq9Secret",
	"user=app password=Zq9Secret host=127.0.0.1 port=1 sslmode=disable",
	// Oracle
	"oracle://app:Zq9Secret@127.0.0.1:badport/svc",
	`oracle://app:Zq9"Secret@127.0.0.1:1/svc`,
	"oracle://app:Zq9#Secret@127.0.0.1:1/svc",
	"oracle://app:Zq9Secret@127.0.0.1:1/svc#fragment",
	"oracle://app:Zq9Secret@127.0.0.1:1/svc?TIMEOUT=Zq9Secret",
}

// leaks reports the parts of the password found in s.
func leaks(s string) []string {
	var out []string
	for _, p := range []string{"Zq9", "Secret"} {
		if strings.Contains(s, p) {
			out = append(out, p)
		}
	}
	return out
}

// TestDSNPasswordNeverPrinted runs the CLI with each hostile DSN, given as
// --dsn and as $ONCEBOX_DSN, and checks that no part of the password
// reaches stdout or stderr, and that the error still says which input is at
// fault.
func TestDSNPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	for _, dsn := range hostileDSNs {
		for _, viaEnv := range []bool{false, true} {
			args := []string{"--timeout", "10s", "status"}
			getenv := func(string) string { return "" }
			if viaEnv {
				getenv = func(k string) string {
					if k == "ONCEBOX_DSN" {
						return dsn
					}
					return ""
				}
			} else {
				args = append([]string{"--dsn", dsn}, args...)
			}
			var out, errOut bytes.Buffer
			code := runEnv(env{args: args, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: getenv})
			require.NotEqual(t, 0, code, "%s: %s", dsn, errOut.String())
			require.Empty(t, leaks(out.String()+errOut.String()), "DSN %q (env %v) leaked: %s", dsn, viaEnv, errOut.String())
			require.True(t, strings.Contains(errOut.String(), "--dsn") || strings.Contains(errOut.String(), "connect"),
				"the error names the input at fault: %s", errOut.String())
		}
	}
}

// TestConnectErrorsHideThePassword calls connect directly: the error value
// itself carries no part of the password.
func TestConnectErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range hostileDSNs {
		var errOut bytes.Buffer
		a := &app{env: env{getenv: func(string) string { return "" }, stderr: &errOut}, g: globals{dsn: dsn}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := a.connect(ctx)
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("DSN %q connected", dsn)
		}
		require.Empty(t, leaks(err.Error()+errOut.String()), "DSN %q leaked: %v", dsn, err)
	}
}
