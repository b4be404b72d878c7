package shipping

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
)

// The service's Retry really doubles its wait. Without MaxInterval,
// Watermill's backoff waits InitialInterval every time: 50, 50, 50 ms. A
// timer never fires early, so the third wait is at least 200 ms with the
// doubling, whatever the machine's load; without it, it is about 50 ms.
func TestRetryPolicyDoublesTheWait(t *testing.T) {
	t.Parallel()
	cfg := Config{MaxRetries: 3, RetryInterval: 50 * time.Millisecond, Logger: watermill.NopLogger{}}
	var mu sync.Mutex
	var calls []time.Time
	h := RetryPolicy(cfg).Middleware(func(*message.Message) ([]*message.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		return nil, errors.New("try again")
	})
	_, err := h(message.NewMessage(watermill.NewUUID(), nil))
	require.Error(t, err)
	require.Len(t, calls, 4, "the first run and 3 retries")
	require.GreaterOrEqual(t, calls[3].Sub(calls[2]), 200*time.Millisecond, "the third wait is 50ms × 2²")
	require.GreaterOrEqual(t, calls[2].Sub(calls[1]), 100*time.Millisecond, "the second wait is 50ms × 2")
}
