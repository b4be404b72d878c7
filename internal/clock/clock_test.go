package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/clock"
)

// afterOnly hides every method of the clock it wraps but oncebox.Clock's.
type afterOnly struct{ oncebox.Clock }

// oddTimer has a NewTimer whose result cannot be stopped.
type oddTimer struct{ *clockwork.FakeClock }

func (c oddTimer) NewTimer(d time.Duration) <-chan time.Time { return c.After(d) }

func fired(t clock.Timer) bool {
	select {
	case <-t.Chan():
		return true
	default:
		return false
	}
}

// The tests pass clockwork's fake clock as it is.
var _ oncebox.Clock = (*clockwork.FakeClock)(nil)

func TestNewTimerUsesTheFakeClocksTimer(t *testing.T) {
	t.Parallel()
	fake := clockwork.NewFakeClock()
	tm := clock.NewTimer(fake, time.Second)
	fake.Advance(999 * time.Millisecond)
	require.False(t, fired(tm), "fired before its time")
	fake.Advance(time.Millisecond)
	require.True(t, fired(tm), "did not fire at its time")

	stopped := clock.NewTimer(fake, time.Second)
	require.True(t, stopped.Stop(), "Stop of a waiting timer: the fake clock's own timer reports it stopped one")
	fake.Advance(time.Hour)
	require.False(t, fired(stopped), "a stopped timer fired")
}

// A stopped timer is no longer one of the fake clock's waiters, which the
// tests count with BlockUntilContext (at least n waiters): with three
// stopped and one live, waiting for two times out; were the stopped ones
// still counted, it would return at once.
func TestNewTimerStoppedIsNoWaiter(t *testing.T) {
	t.Parallel()
	fake := clockwork.NewFakeClock()
	for range 3 {
		clock.NewTimer(fake, time.Second).Stop()
	}
	live := clock.NewTimer(fake, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.NoError(t, fake.BlockUntilContext(ctx, 1))
	require.ErrorIs(t, fake.BlockUntilContext(ctx, 2), context.DeadlineExceeded)
	fake.Advance(time.Second)
	require.True(t, fired(live))
	require.False(t, live.Stop(), "Stop after it fired")
}

func TestNewTimerFallsBackToAfter(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]func(*clockwork.FakeClock) oncebox.Clock{
		"no NewTimer":        func(f *clockwork.FakeClock) oncebox.Clock { return afterOnly{f} },
		"NewTimer of a chan": func(f *clockwork.FakeClock) oncebox.Clock { return oddTimer{f} },
	} {
		t.Run(name, func(t *testing.T) {
			fake := clockwork.NewFakeClock()
			tm := clock.NewTimer(c(fake), time.Second)
			require.False(t, tm.Stop(), "an After wait cannot be stopped")
			fake.Advance(time.Second)
			require.True(t, fired(tm), "the After channel fires on the clock")
		})
	}
}

func TestNewTimerRealClock(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]oncebox.Clock{"nil": nil, "Real": clock.Real{}} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			tm := clock.NewTimer(c, 5*time.Millisecond)
			at := <-tm.Chan()
			require.GreaterOrEqual(t, at.Sub(start), 5*time.Millisecond)
			require.True(t, clock.NewTimer(c, time.Hour).Stop(), "Stop of a waiting real timer")
		})
	}
}

func TestOr(t *testing.T) {
	t.Parallel()
	require.Equal(t, clock.Real{}, clock.Or(nil))
	fake := clockwork.NewFakeClock()
	require.Same(t, fake, clock.Or(fake))
	before := time.Now()
	now := clock.Or(nil).Now()
	require.False(t, now.Before(before))
	require.GreaterOrEqual(t, clock.Real{}.Since(before), time.Duration(0))
	select {
	case <-clock.Real{}.After(time.Millisecond):
	case <-time.After(time.Minute):
		t.Fatal("Real.After did not fire")
	}
}
