package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBadFlagsExitWithUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-broker", "nats"},
		{"-rate", "0"},
		{"-duration", "-1s"},
		{"-run-id", "Not-Valid"},
		{"-log-level", "loud"},
		{"stray"},
	} {
		var out bytes.Buffer
		require.Equal(t, 2, run(args, &out, &out), "%v: %s", args, out.String())
		require.NotEmpty(t, out.String())
	}
	require.Equal(t, 0, run([]string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}))
}

// A short run of the command itself, on the in-process Kafka.
func TestShortRunIsClean(t *testing.T) {
	args := []string{"-duration", "2s", "-rate", "30", "-config", "../../oncebox.yaml", "-drain-timeout", "15s"}
	if dsn := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"); dsn != "" {
		args = append(args, "-database-url", dsn)
	}
	t.Setenv("BROKER", "kafka")
	t.Setenv("KAFKA_BROKERS", "")
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "all-in-one: OK:")
	require.Contains(t, stdout.String(), "lost=0 doubled=0")
}
