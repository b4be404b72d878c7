package main

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// discard is a message.Publisher that accepts everything.
type discard struct{}

func (discard) Publish(string, ...*message.Message) error { return nil }
func (discard) Close() error                              { return nil }

// listenHooks tells when the relay listens.
type listenHooks struct {
	poller.NopHooks
	up atomic.Bool
}

func (h *listenHooks) ListenerUp()                     { h.up.Store(true) }
func (h *listenHooks) ListenerDown(error)              {}
func (h *listenHooks) Woken(string, poller.WakeTarget) {}

// runWithClock runs the CLI in a goroutine on clock, advancing it by
// waitPoll whenever the CLI waits on it, until the CLI returns.
func (c *cli) runWithClock(clock *clockwork.FakeClock, args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--dsn", pgtest.DSN(), "--schema", c.schema.Name}, args...)
	done := make(chan int, 1)
	go func() {
		done <- runEnv(env{args: full, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
			clock: clock, interactive: func() bool { return false }, getenv: func(string) string { return "" }})
	}()
	deadline := time.After(time.Minute)
	for {
		select {
		case code := <-done:
			return result{code: code, stdout: c.mask(out.String()), stderr: c.mask(errOut.String())}
		case <-deadline:
			c.t.Fatal("the CLI did not return")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		if clock.BlockUntilContext(ctx, 1) == nil {
			clock.Advance(waitPoll)
		}
		cancel()
	}
}

// dlq retry --wait returns once the relay's dlq-retry job moved the rows
// back to the outbox: on PostgreSQL the retry's NOTIFY wakes a relay whose
// fake clock never moves, so the job ran because it was woken. Before,
// the CLI only marked the rows and said nothing of when they would move.
func TestRetryWaitReturnsWhenTheRowsAreBackInTheOutbox(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2}, seed{n: 3})
	relayClock := clockwork.NewFakeClockAt(now)
	h := &listenHooks{}
	cfg := poller.Config{Dialect: c.schema.Dialect, Clock: relayClock, Hooks: h}
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	cfg.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{"order-created": {}}
	cfg.Oncebox.Outbox.StrictEventTypes = true
	p, err := poller.New(c.schema.Beginner, discard{}, cfg, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-p.Running()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
	// The retry must come after the relay's LISTEN is in effect.
	require.Eventually(t, func() bool { return h.up.Load() }, 10*time.Second, 10*time.Millisecond)

	cliClock := clockwork.NewFakeClockAt(now)
	r := c.runWithClock(cliClock, "dlq", "retry", "--wait", id(1).String(), id(2).String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 of 2 rows set to TO_RETRY\n")
	require.Contains(t, r.stdout, "2 rows are back in the outbox after ")
	require.Equal(t, 1, c.countDLQ(), "row 3 was not retried")

	// By filter, with --json.
	r = c.runWithClock(cliClock, "--json", "dlq", "retry", "--wait", "--all", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"back_in_outbox": 1`)
	require.Zero(t, c.countDLQ())
}

// With no relay running, --wait gives up after --timeout with a message
// that says what is missing, and exit 1; the row stays TO_RETRY.
func TestRetryWaitTimesOutWithoutARelay(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1})
	clock := clockwork.NewFakeClockAt(now)
	r := c.runWithClock(clock, "dlq", "retry", "--wait", "--timeout", "5s", id(1).String())
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--wait: 1 row is still TO_RETRY or IN_PROCESS after 5s (0 back in the outbox)")
	require.Contains(t, r.stderr, "is a relay with the DLQ enabled")
	require.Equal(t, "TO_RETRY", c.dlqStatus(1))
	require.Equal(t, 5*time.Second, clock.Since(now), "it waited on its clock, to the timeout")

	for _, bad := range [][]string{
		{"dlq", "retry", "--timeout", "5s", id(1).String()},
		{"dlq", "retry", "--wait", "--timeout", "0s", id(1).String()},
		{"dlq", "resolve", "--wait", id(1).String()},
	} {
		r := c.run("", bad...)
		require.Equal(t, 2, r.code, "%v: %s", bad, r.stderr)
	}
}
