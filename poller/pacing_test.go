package poller_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// The poll loop follows the adaptive strategy on the injected clock, and a
// simulated idle hour costs about 70 claim statements plus the jobs'.
func TestPollLoopPacingOverAnIdleHour(t *testing.T) {
	t.Parallel()
	trace := &pgtest.StatementCounter{}
	b := setup(t, pgtest.WithTracer(trace))
	h := &hooks{}
	cfg := b.config()
	// Strict: this is the pace of one type's loop; the discovery of other
	// types has its own test (conformance.TestIdleDiscoveryCostsAboutSeventyPollsAnHour).
	cfg.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{"order-created": {}}
	cfg.Oncebox.Outbox.StrictEventTypes = true
	cfg.Hooks = h
	cfg.Oncebox.Outbox.Defaults.BatchSize = 5
	p, err := poller.New(b.schema.Beginner, newRecorder(), cfg, nil)
	require.NoError(t, err)
	trace.Reset()
	start(t, p)

	// Ramp-up: 250ms, then × the default multiplier 1.5.
	stepUntil(t, b.clock, 3, 125*time.Millisecond, time.Minute, func() bool { return len(h.Snapshot().Polls) >= 3 })
	polls := h.Snapshot().Polls
	require.Equal(t, []time.Duration{250 * time.Millisecond, 375 * time.Millisecond, 562500 * time.Microsecond},
		[]time.Duration{polls[0].NextDelay, polls[1].NextDelay, polls[2].NextDelay})

	// The rest of the hour.
	stepUntil(t, b.clock, 3, 500*time.Millisecond, 2*time.Hour, func() bool { return b.clock.Since(t0) >= time.Hour })
	s := h.Snapshot()
	claims, jobs := 0, 0
	for _, stmt := range trace.Statements() {
		if len(stmt) > 8 && stmt[:8] == "WITH due" {
			claims++
		} else {
			jobs++
		}
	}
	t.Logf("idle hour: %d polls, %d claim statements, %d job statements, %d job runs", len(s.Polls), claims, jobs, len(s.Jobs))
	require.InDelta(t, 72, len(s.Polls), 4)
	require.Equal(t, len(s.Polls), claims, "one statement per poll")
	require.LessOrEqual(t, jobs, 30, "recovery and clean-up add a few statements an hour")

	// A burst: a full batch is claimed again at once, and resets the ramp
	// to the minimum.
	b.publish(t, b.clock, "order-created", 5)
	n := len(s.Polls)
	stepUntil(t, b.clock, 3, time.Second, 2*time.Minute, func() bool {
		for _, pi := range h.Snapshot().Polls[n:] {
			if pi.Full {
				return true
			}
		}
		return false
	})
	for _, pi := range h.Snapshot().Polls[n:] {
		if pi.Full {
			require.Zero(t, pi.NextDelay, "a full batch is claimed again at once")
		}
	}
}
