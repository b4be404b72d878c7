// Package pollertest holds what tests of the relay share: a recorder of the
// poller's hooks and the helpers that drive a fake clock.
package pollertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Hooks records what a poller reports. The zero value is ready.
type Hooks struct {
	poller.NopHooks
	mu   sync.Mutex
	seen Snapshot
}

// Snapshot is what Hooks recorded up to a moment.
type Snapshot struct {
	// Sent is the number of events reported sent (PROCESSED).
	Sent        int
	Polls       []poller.PollInfo
	Failures    []poller.Failure
	Unavailable int
	Stale       [][2]int // want, got
	Jobs        []poller.JobInfo
}

// PollDone implements poller.Hooks.
func (h *Hooks) PollDone(i poller.PollInfo) {
	h.mu.Lock()
	h.seen.Polls = append(h.seen.Polls, i)
	h.mu.Unlock()
}

// Sent implements poller.Hooks.
func (h *Hooks) Sent(_ string, ids []oncebox.EventID) {
	h.mu.Lock()
	h.seen.Sent += len(ids)
	h.mu.Unlock()
}

// Counts returns the events sent and failed, and the batches released
// because the broker was unavailable, so far.
func (h *Hooks) Counts() (sent, failed, unavailable int) {
	s := h.Snapshot()
	return s.Sent, len(s.Failures), s.Unavailable
}

// SendFailed implements poller.Hooks.
func (h *Hooks) SendFailed(_ string, f []poller.Failure) {
	h.mu.Lock()
	h.seen.Failures = append(h.seen.Failures, f...)
	h.mu.Unlock()
}

// BrokerUnavailable implements poller.Hooks.
func (h *Hooks) BrokerUnavailable(string, int, error) {
	h.mu.Lock()
	h.seen.Unavailable++
	h.mu.Unlock()
}

// StaleFinalize implements poller.Hooks.
func (h *Hooks) StaleFinalize(_ string, want, got int) {
	h.mu.Lock()
	h.seen.Stale = append(h.seen.Stale, [2]int{want, got})
	h.mu.Unlock()
}

// JobDone implements poller.Hooks.
func (h *Hooks) JobDone(j poller.JobInfo) {
	h.mu.Lock()
	h.seen.Jobs = append(h.seen.Jobs, j)
	h.mu.Unlock()
}

// Snapshot returns a copy of what was recorded.
func (h *Hooks) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Snapshot{
		Sent:        h.seen.Sent,
		Polls:       append([]poller.PollInfo(nil), h.seen.Polls...),
		Failures:    append([]poller.Failure(nil), h.seen.Failures...),
		Unavailable: h.seen.Unavailable,
		Stale:       append([][2]int(nil), h.seen.Stale...),
		Jobs:        append([]poller.JobInfo(nil), h.seen.Jobs...),
	}
}

// StepUntil advances the fake clock by step whenever the given number of
// goroutines wait on it, until cond holds or the budget of simulated time is
// spent. It returns the simulated time spent.
func StepUntil(t testing.TB, clock *clockwork.FakeClock, waiters int, step, budget time.Duration, cond func() bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var spent time.Duration
	for {
		require.NoError(t, clock.BlockUntilContext(ctx, waiters), "waiting for %d goroutines to wait on the clock", waiters)
		if cond() {
			return spent
		}
		require.Less(t, spent, budget, "condition not met after %s of simulated time", budget)
		clock.Advance(step)
		spent += step
	}
}

// Eventually polls cond until it holds or 60 seconds pass.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 60*time.Second, 5*time.Millisecond, what)
}
