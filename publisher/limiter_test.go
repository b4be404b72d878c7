package publisher

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The limiter holds at most limiterSize entries however many event types
// the process notifies (it held one per type for ever: 200,000 types took
// 36 MB), and still skips a type notified within the window.
func TestLimiterIsBounded(t *testing.T) {
	t.Parallel()
	l := newNotifyLimiter()
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for i := range 3 * limiterSize {
		require.True(t, l.allow(notifyKey{"ch", "type-" + strconv.Itoa(i)}, now, time.Second))
		now = now.Add(time.Microsecond)
	}
	require.LessOrEqual(t, l.len(), limiterSize)
	// The most recent type is still held back within its window.
	last := notifyKey{"ch", "type-" + strconv.Itoa(3*limiterSize-1)}
	require.False(t, l.allow(last, now, time.Second))
	require.True(t, l.allow(last, now.Add(time.Second), time.Second))
}
