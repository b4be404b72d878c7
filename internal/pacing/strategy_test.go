package pacing

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

func defaultPolling(t *testing.T) oncebox.PollingSettings {
	ec, err := oncebox.Config{}.Event("t")
	require.NoError(t, err)
	return ec.Polling
}

// idleHour simulates an hour without events and returns the number of polls
// and when the delay first reached the cap.
func idleHour(p oncebox.PollingSettings) (polls int, capReachedAfter time.Duration) {
	s := New(p)
	var elapsed time.Duration
	capReachedAfter = -1
	for elapsed <= time.Hour { // the first poll is at once
		polls++
		d := s.Next(false)
		if d == p.MaxFixedDelay && capReachedAfter < 0 {
			capReachedAfter = elapsed + d
		}
		elapsed += d
	}
	return polls, capReachedAfter
}

func TestAdaptiveDelaysFollowTheBriefsVectors(t *testing.T) {
	t.Parallel()
	s := New(defaultPolling(t))
	want := []time.Duration{250 * time.Millisecond, 375 * time.Millisecond, 562500 * time.Microsecond,
		843750 * time.Microsecond}
	for i, w := range want {
		require.Equal(t, w, s.Next(false), "empty poll %d", i+1)
	}
	for range 20 {
		s.Next(false)
	}
	require.Equal(t, time.Minute, s.Next(false), "capped at max-fixed-delay")
	require.Equal(t, 250*time.Millisecond, s.Next(true), "a full batch resets to the minimum")
	require.Equal(t, 250*time.Millisecond, s.Next(false), "and the ramp starts again")
	require.Equal(t, 375*time.Millisecond, s.Next(false))
}

func TestIdleHourCostsAboutSeventyPolls(t *testing.T) {
	t.Parallel()
	polls, capAt := idleHour(defaultPolling(t))
	t.Logf("defaults: %d polls per idle hour, cap reached after %s", polls, capAt)
	require.InDelta(t, 70, polls, 5, "about 70 polls an idle hour")
	require.InDelta(t, 3.5*60, capAt.Seconds(), 15, "the 1m cap is reached after about 3.5 minutes")

	low := oncebox.PollingSettings{Type: oncebox.PollingAdaptive, MinFixedDelay: 10 * time.Second,
		MaxFixedDelay: 5 * time.Minute, Multiplier: 2}
	polls, _ = idleHour(low)
	t.Logf("low-priority: %d polls per idle hour", polls)
	require.InDelta(t, 15, polls, 3, "about 15 polls an idle hour for the brief's low-priority type")

	fixed := oncebox.PollingSettings{Type: oncebox.PollingFixed, MinFixedDelay: 250 * time.Millisecond,
		MaxFixedDelay: time.Minute, Multiplier: 1.5}
	polls, _ = idleHour(fixed)
	require.Equal(t, 14401, polls, "fixed 250ms: 14,400 polls an hour, 200 times more than adaptive")
}

func TestStrategyNeverOverflows(t *testing.T) {
	t.Parallel()
	s := New(oncebox.PollingSettings{Type: oncebox.PollingAdaptive, MinFixedDelay: time.Hour,
		MaxFixedDelay: time.Duration(1<<63 - 1), Multiplier: 1e6})
	for range 10 {
		require.Positive(t, s.Next(false))
	}
}

func TestScheduleRefusesNaNAndInfiniteMultipliers(t *testing.T) {
	t.Parallel()
	ok := Schedule{Min: time.Second, Max: time.Minute, Multiplier: 2}
	require.NoError(t, ok.Validate("s"))
	for _, m := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0.5} {
		bad := ok
		bad.Multiplier = m
		require.ErrorIs(t, bad.Validate("poller: Recovery"), oncebox.ErrInvalidConfig, "multiplier %v", m)
	}
}
