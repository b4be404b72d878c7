package poller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A statement cut short by the poller's own Close is not a failure for
// the hooks and logs (TestMySQLFourPollersDeliverEveryEventOnce once saw
// "oncebox: discover event types: context canceled" reported at Close);
// any other error, or a context error while the poller runs, still is.
func TestClosingIsOnlyTheEndOfTheRun(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	wrapped := fmt.Errorf("oncebox: discover event types: %w", context.Canceled)
	require.True(t, closing(done, wrapped))
	require.True(t, closing(done, fmt.Errorf("claim: %w", context.DeadlineExceeded)))
	require.False(t, closing(live, wrapped), "a context error while the poller runs is reported")
	require.False(t, closing(done, errors.New("deadlock")), "a real error at close is reported")
	require.False(t, closing(done, nil))
}
